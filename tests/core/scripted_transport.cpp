// SPDX-License-Identifier: BSD-3-Clause
#include "scripted_transport.hpp"

#include "params.hpp"
#include "plugin.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <stdexcept>

namespace dat2::test {

using kit::Completion;

bool parse_scripted_params(const std::string &text, ScriptedParams &out, std::string &error) {
    kit::ParamList words;
    if (!kit::split_params(text, words, error))
        return false;
    for (const auto &[key, value] : words) {
        const bool on = value == "1";
        if (key == "in_order")
            out.caps.requests_in_order = on;
        else if (key == "fence")
            out.caps.fence = on;
        else if (key == "recv_before_connect")
            out.caps.recv_before_connect = on;
        else if (key == "recvs_out_of_order")
            out.caps.recvs_out_of_order = on;
        else if (key == "srq")
            out.caps.max_srq_recvs = std::stoi(value);
        else {
            error = "unknown key '" + key + "'";
            return false;
        }
    }
    return true;
}

ScriptedTransport::ScriptedTransport(kit::Ia &ia, const ScriptedParams &params) : Transport(ia), params_(params) {
    auto &a = reinterpret_cast<sockaddr_in &>(address_);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

ScriptedTransport::~ScriptedTransport() = default;

ScriptedTransport &ScriptedTransport::of(DAT_HANDLE any_kit_object) {
    auto *o = static_cast<kit::ObjectHeader *>(any_kit_object);
    return static_cast<ScriptedTransport &>(*o->ia->transport);
}

DAT_RETURN ScriptedTransport::open(kit::Capabilities &caps) {
    caps = params_.caps;
    return DAT_SUCCESS;
}

// ---- completion queues ----------------------------------------------------------

DAT_RETURN ScriptedTransport::cq_open(kit::Evd &, void *&cq) {
    cq = new Queue;
    return DAT_SUCCESS;
}

void ScriptedTransport::cq_close(kit::Evd &evd) { delete static_cast<Queue *>(evd.cq); }

int ScriptedTransport::cq_read(kit::Evd &evd, Completion *out, int max) {
    std::lock_guard<std::mutex> lock(mu_);
    ++cq_reads_;
    for (auto it = late_.begin(); it != late_.end();) {
        if (--it->reads > 0) {
            ++it;
            continue;
        }
        kit::Evd *target = it->op->is_recv ? it->op->ep->recv_evd : it->op->ep->request_evd;
        static_cast<Queue *>(target->cq)->completions.push_back(it->completion);
        it = late_.erase(it);
    }
    auto &q = static_cast<Queue *>(evd.cq)->completions;
    int n = 0;
    while (n < max && !q.empty()) {
        out[n++] = q.front();
        q.pop_front();
    }
    return n;
}

bool ScriptedTransport::cq_arm(kit::Evd &evd) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<Queue *>(evd.cq)->completions.empty();
}

void ScriptedTransport::complete(kit::Op *op, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length,
                                 DAT_EP_HANDLE taker) {
    kit::Ep *ep = taker ? static_cast<kit::Ep *>(taker) : op->ep;
    kit::Evd *evd = op->is_recv ? ep->recv_evd : ep->request_evd;
    if (!evd || !evd->cq)
        throw std::logic_error("complete(): the op's EP has no DTO EVD for it");
    Completion c{};
    c.op = op;
    c.status = status;
    c.length = length;
    c.immed = Completion::Immed::kNone;
    c.ep = taker ? ep : nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (op->srq) {
            auto &v = srqs_[op->srq];
            for (auto it = v.begin(); it != v.end(); ++it)
                if (*it == op) {
                    v.erase(it);
                    break;
                }
        }
        static_cast<Queue *>(evd->cq)->completions.push_back(c);
    }
    kit::evd_wake(*evd);
}

// ---- memory -----------------------------------------------------------------------

DAT_RETURN ScriptedTransport::mr_register(kit::Lmr &lmr, kit::Registration &out) {
    out.desc = &lmr;
    out.rmr_context = 0x1000 + static_cast<DAT_RMR_CONTEXT>(lmr.lmr_context & 0xffff);
    return DAT_SUCCESS;
}

// ---- endpoints and connections ------------------------------------------------------

DAT_RETURN ScriptedTransport::ep_open(kit::Ep &ep, void *&tp) {
    std::lock_guard<std::mutex> lock(mu_);
    eps_[&ep];
    tp = &ep;
    return DAT_SUCCESS;
}

void ScriptedTransport::ep_close(kit::Ep &) {}

void ScriptedTransport::write_late(kit::Op *op, int reads, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length) {
    Completion c{};
    c.op = op;
    c.status = status;
    c.length = length;
    std::lock_guard<std::mutex> lock(mu_);
    late_.push_back(Late{op, reads, c});
}

std::size_t ScriptedTransport::ops_writing_memory(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<std::size_t>(
        std::count_if(late_.begin(), late_.end(), [&](const Late &l) { return l.op->ep == &ep; }));
}

void ScriptedTransport::ep_free(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    eps_.erase(&ep);
}

void ScriptedTransport::ep_reset(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    ++eps_[&ep].resets;
}

ScriptedTransport::EpLog ScriptedTransport::log(DAT_EP_HANDLE ep) {
    std::lock_guard<std::mutex> lock(mu_);
    return eps_[static_cast<kit::Ep *>(ep)];
}

kit::Op *ScriptedTransport::op(DAT_EP_HANDLE ep, std::size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto &posted = eps_[static_cast<kit::Ep *>(ep)].posted;
    if (n >= posted.size())
        throw std::out_of_range("op(): not that many DTOs were posted");
    return posted[n].op;
}

DAT_RETURN ScriptedTransport::connect(kit::Ep &ep, const sockaddr *, DAT_CONN_QUAL, const void *, std::size_t,
                                      DAT_TIMEOUT) {
    std::lock_guard<std::mutex> lock(mu_);
    ++eps_[&ep].connects;
    return DAT_SUCCESS;
}

void ScriptedTransport::connect_cancel(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    ++eps_[&ep].cancels;
}

// The test ends the connection when it chooses (end_connection), as a
// peer's answer would.
DAT_RETURN ScriptedTransport::disconnect(kit::Ep &ep, bool graceful) {
    std::lock_guard<std::mutex> lock(mu_);
    ++eps_[&ep].disconnects;
    eps_[&ep].last_graceful = graceful;
    return DAT_SUCCESS;
}

void ScriptedTransport::establish(DAT_EP_HANDLE ep, DAT_PORT_QUAL local_port, const void *pdata, std::size_t len) {
    auto &e = *static_cast<kit::Ep *>(ep);
    if (!params_.caps.recv_before_connect)
        kit::ep_transport_ready(e);
    kit::on_established(e, pdata, len, local_port);
}

void ScriptedTransport::end_connection(DAT_EP_HANDLE ep, bool broken) {
    kit::on_disconnected(*static_cast<kit::Ep *>(ep), broken);
}

DAT_RETURN ScriptedTransport::psp_open(kit::Psp &, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) {
    std::lock_guard<std::mutex> lock(mu_);
    *assigned = qual ? *qual : next_qual_++;
    tp = this;
    return DAT_SUCCESS;
}

void ScriptedTransport::request(DAT_PSP_HANDLE psp, const void *pdata, std::size_t len) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
    from.sin_port = htons(5000);
    static int token;
    kit::on_connection_request(*static_cast<kit::Psp *>(psp), &token, reinterpret_cast<sockaddr *>(&from), pdata, len);
}

DAT_RETURN ScriptedTransport::accept(kit::Cr &, kit::Ep &ep, const void *, std::size_t) {
    if (!params_.caps.recv_before_connect)
        kit::ep_transport_ready(ep);
    return DAT_SUCCESS;
}

// ---- posts --------------------------------------------------------------------------

void ScriptedTransport::fail_next_post(DAT_RETURN r) {
    std::lock_guard<std::mutex> lock(mu_);
    next_post_ = r;
}

DAT_RETURN ScriptedTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                                   const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS flags) {
    std::size_t length = 0;
    for (int i = 0; i < nsegs; ++i)
        length += segs[i].length;
    std::lock_guard<std::mutex> lock(mu_);
    if (DAT_RETURN r = next_post_) {
        next_post_ = DAT_SUCCESS;
        return r;
    }
    eps_[&ep].posted.push_back({&op, kind, flags, length, false});
    return DAT_SUCCESS;
}

// ---- shared receive queues ------------------------------------------------------------

DAT_RETURN ScriptedTransport::srq_open(kit::Srq &srq, void *&tp) {
    std::lock_guard<std::mutex> lock(mu_);
    srqs_[&srq];
    tp = this;
    return DAT_SUCCESS;
}

void ScriptedTransport::srq_close(kit::Srq &srq) {
    std::lock_guard<std::mutex> lock(mu_);
    srqs_.erase(&srq);
}

DAT_RETURN ScriptedTransport::srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *, int) {
    std::lock_guard<std::mutex> lock(mu_);
    srqs_[&srq].push_back(&op);
    return DAT_SUCCESS;
}

std::size_t ScriptedTransport::srq_posted(DAT_SRQ_HANDLE srq) {
    std::lock_guard<std::mutex> lock(mu_);
    return srqs_[static_cast<kit::Srq *>(srq)].size();
}

kit::Op *ScriptedTransport::srq_op(DAT_SRQ_HANDLE srq, std::size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto &v = srqs_[static_cast<kit::Srq *>(srq)];
    if (n >= v.size())
        throw std::out_of_range("srq_op(): not that many receives are queued");
    return v[n];
}

// ---- registration ------------------------------------------------------------------

void register_scripted(const char *ia_name, const char *ia_params) {
    static std::vector<std::unique_ptr<DAT_PROVIDER_INFO>> infos;
    auto info = std::make_unique<DAT_PROVIDER_INFO>();
    std::snprintf(info->ia_name, sizeof info->ia_name, "%s", ia_name);
    info->dapl_version_major = 2;
    info->dapl_version_minor = 0;
    info->is_thread_safe = DAT_TRUE;
    kit::provider_init(info.get(), ia_params,
                       &kit::make_transport<ScriptedTransport, ScriptedParams, parse_scripted_params>);
    infos.push_back(std::move(info));
}

} // namespace dat2::test
