// SPDX-License-Identifier: BSD-3-Clause
// A transport that does only what a test tells it: the smallest complete
// kit::Transport (docs/transport.md walks through it). Posts are recorded,
// nothing moves by itself; the test completes, fails, reorders and holds
// requests, establishes and ends connections, and delivers connection
// requests, each at the moment it chooses, so that every rule of the kit
// (completion order, flushes, suppression, fence, SRQs, disconnects) is
// tested deterministically.
//
// ia_params (dat.conf syntax, key=value): in_order=1, fence=1,
// recv_before_connect=1, srq=N (SRQ capacity) set the Capabilities open()
// returns.
#pragma once

#include "transport.hpp"

#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace dat2::test {

struct ScriptedParams {
    kit::Capabilities caps;
};
bool parse_scripted_params(const std::string &text, ScriptedParams &out, std::string &error);

class ScriptedTransport final : public kit::Transport {
public:
    struct Posted {
        kit::Op *op;
        kit::PostKind kind;
        DAT_COMPLETION_FLAGS flags;
        std::size_t length; // of its segments
        bool ext;
    };
    struct EpLog {
        std::vector<Posted> posted;
        int connects = 0, cancels = 0, disconnects = 0, resets = 0;
        bool last_graceful = false;
    };

    ScriptedTransport(kit::Ia &ia, const ScriptedParams &params);
    ~ScriptedTransport() override;

    // ---- the test's side -----------------------------------------------
    static ScriptedTransport &of(DAT_HANDLE any_kit_object);
    EpLog log(DAT_EP_HANDLE ep); // a copy
    // The n-th DTO posted on `ep` (0: the first).
    kit::Op *op(DAT_EP_HANDLE ep, std::size_t n);
    // A completion of `op` in the queue of its EVD (for an SRQ receive, the
    // recv EVD of `taker`, which the completion names).
    void complete(kit::Op *op, DAT_DTO_COMPLETION_STATUS status = DAT_DTO_SUCCESS, std::uint32_t length = 0,
                  DAT_EP_HANDLE taker = nullptr);
    // The connection is up; `pdata`: what the peer's accept carried.
    void establish(DAT_EP_HANDLE ep, DAT_PORT_QUAL local_port = 4242, const void *pdata = nullptr, std::size_t len = 0);
    void end_connection(DAT_EP_HANDLE ep, bool broken);
    // A connection request arrives at `psp` from 127.0.0.2.
    void request(DAT_PSP_HANDLE psp, const void *pdata = nullptr, std::size_t len = 0);
    // The next post() (of any EP) fails with this.
    void fail_next_post(DAT_RETURN r);
    std::size_t srq_posted(DAT_SRQ_HANDLE srq);
    kit::Op *srq_op(DAT_SRQ_HANDLE srq, std::size_t n);
    int srq_drops() const { return srq_drops_; }
    // The library keeps writing the buffer of `op` (ops_writing_memory)
    // until the kit has read the queues `reads` more times; then `op`
    // completes with `status` (a receive matched before it was cancelled).
    void write_late(kit::Op *op, int reads, DAT_DTO_COMPLETION_STATUS status, std::uint32_t length = 0);
    std::size_t late_left() {
        std::lock_guard<std::mutex> lock(mu_);
        return late_.size();
    }
    // cq_read() calls so far, on every EVD: what the kit asks of a queue.
    int cq_reads() {
        std::lock_guard<std::mutex> lock(mu_);
        return cq_reads_;
    }

    // ---- kit::Transport ------------------------------------------------
    DAT_RETURN open(kit::Capabilities &caps) override;
    void query(DAT_IA_ATTR &, DAT_PROVIDER_ATTR &) override {}
    const sockaddr *address() const override { return reinterpret_cast<const sockaddr *>(&address_); }
    DAT_RETURN cq_open(kit::Evd &evd, void *&cq) override;
    void cq_close(kit::Evd &evd) override;
    int cq_read(kit::Evd &evd, kit::Completion *out, int max) override;
    int cq_fd(kit::Evd &) override { return -1; } // complete() wakes the EVD
    bool cq_arm(kit::Evd &evd) override;
    DAT_RETURN mr_register(kit::Lmr &lmr, kit::Registration &out) override;
    void mr_deregister(kit::Lmr &) override {}
    DAT_RETURN ep_open(kit::Ep &ep, void *&tp) override;
    void ep_close(kit::Ep &ep) override;
    void ep_free(kit::Ep &ep) override;
    void ep_reset(kit::Ep &ep) override;
    std::size_t ops_writing_memory(kit::Ep &ep) override;
    DAT_RETURN connect(kit::Ep &ep, const sockaddr *, DAT_CONN_QUAL, const void *, std::size_t, DAT_TIMEOUT) override;
    void connect_cancel(kit::Ep &ep) override;
    DAT_RETURN disconnect(kit::Ep &ep, bool graceful) override;
    DAT_RETURN psp_open(kit::Psp &, const DAT_CONN_QUAL *qual, DAT_CONN_QUAL *assigned, void *&tp) override;
    void psp_close(kit::Psp &) override {}
    DAT_RETURN accept(kit::Cr &cr, kit::Ep &ep, const void *, std::size_t) override;
    DAT_RETURN reject(kit::Cr &, const void *, std::size_t) override { return DAT_SUCCESS; }
    void cr_release(kit::Cr &) override {}
    DAT_RETURN post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                    const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) override;
    DAT_RETURN post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                         DAT_COMPLETION_FLAGS flags) override {
        return post(ep, kit::PostKind::kRecv, op, segs, nsegs, nullptr, flags);
    }
    DAT_RETURN srq_open(kit::Srq &, void *&tp) override;
    void srq_close(kit::Srq &srq) override;
    DAT_RETURN srq_post(kit::Srq &srq, kit::Op &op, const kit::Segment *, int) override;

private:
    struct Queue {
        std::deque<kit::Completion> completions;
    };
    ScriptedParams params_;
    sockaddr_storage address_{};
    std::mutex mu_; // everything below
    std::map<kit::Ep *, EpLog> eps_;
    std::map<kit::Srq *, std::vector<kit::Op *>> srqs_;
    DAT_RETURN next_post_ = DAT_SUCCESS;
    DAT_CONN_QUAL next_qual_ = 10000;
    int srq_drops_ = 0;
    int cq_reads_ = 0;
    struct Late {
        kit::Op *op;
        int reads;
        kit::Completion completion;
    };
    std::vector<Late> late_;
};

// Registers the scripted transport as provider `ia_name` with `ia_params`
// (no dat.conf entry needed: the registry takes dynamic registrations).
void register_scripted(const char *ia_name, const char *ia_params);

} // namespace dat2::test
