// SPDX-License-Identifier: BSD-3-Clause
// Endpoints of the RDM transport: the libfabric endpoint a pair of EVDs
// shares, the contexts of an EP's operations, the address vector, and the
// post paths (tagged messages, RMA, write with immediate data, atomics).
#include "rdm.hpp"

#include "fi_attrs.hpp"
#include "log.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>

namespace dat2::ofi {

namespace {

// The locks of a libfabric endpoint's EVDs, under which their consumers read
// its queues: each taken once, in address order (every taker the same way
// round), after mu_ and dom_mu_ when those are held.
class EvdLocks {
public:
    EvdLocks(kit::Evd *request, kit::Evd *recv) : e_{request, recv == request ? nullptr : recv} {
        if (!e_[0] || (e_[1] && std::less<kit::Evd *>()(e_[1], e_[0])))
            std::swap(e_[0], e_[1]);
        for (kit::Evd *evd : e_)
            if (evd)
                evd->mu.lock();
    }
    ~EvdLocks() {
        for (int i = 1; i >= 0; --i)
            if (e_[i])
                e_[i]->mu.unlock();
    }
    EvdLocks(const EvdLocks &) = delete;
    EvdLocks &operator=(const EvdLocks &) = delete;

private:
    std::array<kit::Evd *, 2> e_;
};

RdmEp &rep_of(kit::Ep &ep) { return *static_cast<RdmEp *>(ep.tp); }

// The contexts of `n` records from `base`, and the receive of a
// connection's hello; a sweep's block has no records (its contexts never
// reach the kit).
RdmCtxBlock *make_block(kit::Op *base, std::size_t n) {
    auto *b = new RdmCtxBlock;
    b->base = base;
    b->n = n;
    b->ctx = std::make_unique<RdmCtx[]>(b->n + 1);
    for (std::size_t i = 0; i < b->n + 1; ++i) {
        b->ctx[i].part[0].owner = b->ctx[i].part[1].owner = &b->ctx[i];
        b->ctx[i].block = b;
    }
    return b;
}

RdmCtxBlock *make_block(kit::Ep &ep) { return make_block(ep.ops.data(), ep.ops.size()); }

std::uint64_t immed_cq_data(std::uint64_t length, std::uint32_t immed) { return kImmedTag | length << 32 | immed; }

} // namespace

// ---- endpoints ---------------------------------------------------------------------

DAT_RETURN RdmTransport::ep_open(kit::Ep &ep, void *&tp) {
    if (DAT_RETURN r = ensure_fabric_ep(ep))
        return r;
    auto rep = std::make_unique<RdmEp>();
    rep->owner = &ep;
    rep->block = make_block(ep);
    {
        std::lock_guard<std::mutex> lock(mu_);
        rep->id = next_ep_id_++;
        const std::uint64_t id = rep->id;
        rep->disconnect_timer = loop().timer([this, id] { graceful_check(id); });
        eps_[id] = rep.get();
    }
    tp = rep.release();
    return DAT_SUCCESS;
}

void RdmTransport::ep_close(kit::Ep &ep) {
    auto *rep = static_cast<RdmEp *>(ep.tp);
    if (!rep)
        return;
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        rep->closed = true;
        // A connected EP that is freed ends its connection: the peer is told,
        // and takes what was sent before (as over a stream socket, whose
        // close follows the data written before it).
        if (rep->conn) {
            if (RdmConn *c = conn_by_id(rep->conn); c && c->state == RdmConn::kConnected && !c->disconnect_sent)
                send_disconnect(*rep, *c);
            retire = detach_conn(rep->conn);
            rep->conn = 0;
        }
        end_data_path(*rep);
        if ((rep->closing = rep->block))
            rep->closing->refs.fetch_add(1, std::memory_order_relaxed);
        retire_block(*rep);
        eps_.erase(rep->id);
    }
    finish_retire(retire);
    loop().sync(); // a handler that found the EP has returned
    loop().timer_free(rep->disconnect_timer);
    rep->disconnect_timer = nullptr;
}

void RdmTransport::ep_free(kit::Ep &ep) {
    auto *rep = static_cast<RdmEp *>(ep.tp);
    if (rep && rep->closing) {
        // The transport's list keeps its own reference until the block's
        // last operation completed (retire_block).
        std::lock_guard<std::mutex> lock(mu_);
        rep->closing->release();
    }
    delete rep;
}

std::size_t RdmTransport::ops_writing_memory(kit::Ep &ep) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto *rep = static_cast<RdmEp *>(ep.tp);
    const RdmCtxBlock *b = rep ? (rep->block ? rep->block : rep->closing) : nullptr;
    if (!b || b->peer_stalled.load(std::memory_order_relaxed))
        return 0;
    // Asked while the kit waits for the end of a connection: a receive
    // posted as end_data_path cancelled the others is cancelled now.
    if (rep->peer_name.empty() && rep->fep)
        cancel_posted(*rep->fep, *b);
    std::size_t n = 0;
    for (std::size_t i = 0; i < b->n; ++i)
        n += b->ctx[i].writes_memory.load(std::memory_order_acquire);
    return n;
}

void RdmTransport::ep_reset(kit::Ep &ep) {
    RdmEp &rep = rep_of(ep);
    RdmConn *retire = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (rep.conn) {
            retire = detach_conn(rep.conn);
            rep.conn = 0;
        }
        end_data_path(rep);
        // Operations of the old connection may still complete: they keep
        // the old contexts, the next connection's records get new ones.
        retire_block(rep);
        rep.block = make_block(ep);
        rep.fep = nullptr;
    }
    reset_connection_counts(ep, rep);
    loop().disarm(rep.disconnect_timer);
    finish_retire(retire);
    loop().sync();
}

// The next connection's disconnects name and wait for its own messages and
// requests only. The completion path counts under the EVD's lock, and only
// for operations of a block not retired: zeroed under the same locks after
// the retirement, no count of the old connection comes in afterwards.
void RdmTransport::reset_connection_counts(kit::Ep &ep, RdmEp &rep) {
    if (ep.recv_evd) {
        std::lock_guard<kit::Lock> lock(ep.recv_evd->mu);
        rep.msgs_in.store(0, std::memory_order_relaxed);
    }
    if (ep.request_evd) {
        std::lock_guard<kit::Lock> lock(ep.request_evd->mu);
        rep.requests_out.store(0, std::memory_order_relaxed);
        rep.rma_out.store(0, std::memory_order_relaxed);
    }
    // No post reaches the transport while the EP is disconnected.
    rep.msgs_out.store(0, std::memory_order_relaxed);
    rep.wrote.store(false, std::memory_order_relaxed);
}

// The libfabric endpoint of `ep`'s pair of EVDs in the domain of its PZ
// (dat_ep_modify may have changed either since dat_ep_create).
RdmFabricEp *RdmTransport::fabric_ep_for(kit::Ep &ep, std::unique_lock<std::mutex> &lock) {
    RdmDomain *dom = domain_acquire(ep.pz);
    if (!dom)
        return nullptr;
    const FabricEpKey key{dom, ep.request_evd, ep.recv_evd};
    // A dat_ep_create of the pair is building its endpoint: that one is
    // waited for, as in ensure_fabric_ep.
    building_done_.wait(lock, [&] { return !building_.count(key); });
    auto found = fabric_eps_.find(key);
    if (found != fabric_eps_.end()) {
        domain_release(dom);
        return found->second.get();
    }
    bool grown = false;
    std::unique_ptr<RdmFabricEp> fep = make_fabric_ep(ep, *dom, grown, true);
    if (!fep) {
        domain_release(dom);
        return nullptr;
    }
    RdmFabricEp *out = fep.get();
    fabric_eps_.emplace(key, std::move(fep));
    if (grown)
        loop().post([this, req = ep.request_evd, rcv = ep.recv_evd] { wake_grown(req, rcv); });
    return out;
}

// An EVD that got a queue in another domain: its waiters look again (at
// the new fd, or polling). From the loop: no lock of ours is held there.
// An EVD still has a libfabric endpoint bound while it exists (cq_close
// closes them first): one found in the table is alive.
void RdmTransport::wake_grown(kit::Evd *request, kit::Evd *recv) {
    kit::Evd *live[2] = {};
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto &[key, fep] : fabric_eps_)
            for (int i = 0; i < 2; ++i) {
                kit::Evd *evd = i ? recv : request;
                if (evd && (std::get<1>(key) == evd || std::get<2>(key) == evd))
                    live[i] = evd;
            }
    }
    for (kit::Evd *evd : live)
        if (evd)
            kit::evd_wake(*evd);
}

// At dat_ep_create, without mu_: enabling an endpoint may take long (rxm
// fills its buffer pools: seconds on a loaded machine), and should neither
// hold up the loop nor count against a connect's timeout.
DAT_RETURN RdmTransport::ensure_fabric_ep(kit::Ep &ep) {
    RdmDomain *dom = domain_acquire(ep.pz);
    if (!dom)
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN);
    const FabricEpKey key{dom, ep.request_evd, ep.recv_evd};
    {
        // Another dat_ep_create of the pair is building its endpoint: that
        // one is waited for. A second one, built and closed, would take the
        // wait fds of the pair's queues with it (close_fep).
        std::unique_lock<std::mutex> lock(mu_);
        building_done_.wait(lock, [&] { return !building_.count(key); });
        if (fabric_eps_.count(key)) {
            domain_release(dom);
            return DAT_SUCCESS;
        }
        building_.insert(key);
    }
    // Whatever way this returns (a throw included), the waiters are told,
    // after the endpoint is in the table.
    struct Building {
        RdmTransport &t;
        const FabricEpKey &key;
        ~Building() {
            std::lock_guard<std::mutex> lock(t.mu_);
            t.building_.erase(key);
            t.building_done_.notify_all();
        }
    } building{*this, key};
    bool grown = false;
    std::unique_ptr<RdmFabricEp> fep = make_fabric_ep(ep, *dom, grown, false);
    if (!fep) {
        domain_release(dom);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    if (grown) {
        for (kit::Evd *evd : {ep.request_evd, ep.recv_evd})
            if (evd)
                kit::evd_wake(*evd);
    }
    // Nobody else made one meanwhile: every other maker of the pair's
    // endpoint waits for this build.
    std::lock_guard<std::mutex> lock(mu_);
    fabric_eps_.emplace(key, std::move(fep));
    return DAT_SUCCESS;
}

class RdmTransport::BindingWindow {
public:
    BindingWindow(RdmTransport &t, kit::Ep &ep, bool mu_held) : t_(t) {
        t_.binding_.fetch_add(1, std::memory_order_seq_cst);
        if (!mu_held) {
            std::lock_guard<std::mutex> wait_out(t_.mu_);
        }
        {
            std::lock_guard<std::mutex> wait_out(t_.dom_mu_);
        }
        consumers_.emplace(ep.request_evd, ep.recv_evd);
    }
    ~BindingWindow() {
        consumers_.reset();
        t_.binding_.fetch_sub(1, std::memory_order_seq_cst);
    }
    BindingWindow(const BindingWindow &) = delete;
    BindingWindow &operator=(const BindingWindow &) = delete;

private:
    RdmTransport &t_;
    std::optional<EvdLocks> consumers_;
};

std::unique_ptr<RdmFabricEp> RdmTransport::make_fabric_ep(kit::Ep &ep, RdmDomain &dom, bool &grown,
                                                         bool mu_held) {
    {
        std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
        if (!mu_held)
            lock.lock();
        forget_departed_peers(dom); // before fi_enable
    }
    auto fep = std::make_unique<RdmFabricEp>();
    fep->recv_budget = new RdmRecvBudget;
    fep->recv_budget->capacity = recv_budget_;
    fep->dom = &dom;
    fep->request_evd = ep.request_evd;
    fep->recv_evd = ep.recv_evd;
    fep->tx_q = cq_part(ep.request_evd, dom, grown);
    fep->rx_q = cq_part(ep.recv_evd, dom, grown);
    if ((ep.request_evd && ep.request_evd->cq && !fep->tx_q) || (ep.recv_evd && ep.recv_evd->cq && !fep->rx_q))
        return nullptr;
    fid_cq *tx = fep->tx_q ? fep->tx_q->cq : dom.null_cq;
    fid_cq *rx = fep->rx_q ? fep->rx_q->cq : dom.null_cq;
    fep->tx_cq = tx;
    fep->rx_cq = rx;
    const char *step = "fi_endpoint";
    int rc = fi_endpoint(dom.domain, info_, &fep->ep, nullptr);
    if (rc == 0) {
        step = "binding the address vector";
        rc = fi_ep_bind(fep->ep, &dom.av->fid, 0);
    }
    // Closed after fi_enable, or after fi_close when the endpoint fails.
    std::optional<BindingWindow> window;
    if (rc == 0) {
        window.emplace(*this, ep, mu_held);
        step = "binding completion queues";
        if (tx == rx) {
            rc = fi_ep_bind(fep->ep, &tx->fid, FI_TRANSMIT | FI_RECV);
        } else {
            // An EVD's queue (with a wait fd) before the null queue (without):
            // rxd opens its own udp queue at the first binding, with a wait fd
            // only if that queue has one, and then cannot add it to the
            // second's wait set (EPERM).
            std::pair<fid_cq *, std::uint64_t> order[2] = {{tx, FI_TRANSMIT}, {rx, FI_RECV}};
            if (tx == dom.null_cq)
                std::swap(order[0], order[1]);
            for (const auto &[cq, direction] : order)
                if (rc == 0)
                    rc = fi_ep_bind(fep->ep, &cq->fid, direction);
        }
    }
    if (rc == 0 && (info_->caps & FI_RMA_EVENT)) {
        fi_cntr_attr cntr_attr{};
        cntr_attr.events = FI_CNTR_EVENTS_COMP;
        cntr_attr.wait_obj = FI_WAIT_NONE;
        step = "a counter of remote operations";
        rc = fi_cntr_open(dom.domain, &cntr_attr, &fep->rma_cntr, nullptr);
        if (rc == 0)
            rc = fi_ep_bind(fep->ep, &fep->rma_cntr->fid, FI_REMOTE_WRITE | FI_REMOTE_READ);
    }
    const bool enable_called = rc == 0;
    if (rc == 0) {
        step = "fi_enable";
        rc = fi_enable(fep->ep);
    }
    if (rc) {
        // Inside the window (without mu_, which would come after an EVD's
        // lock here): nobody reads the queues while it leaves them.
        DAT2_ERR("%s: libfabric endpoint: %s: %s\n", this->name(), step, fi_text(rc));
        close_fep(*fep, enable_called);
        return nullptr;
    }
    window.reset();
    char name[rdmwire::kMaxAddr];
    std::size_t len = sizeof name;
    step = "fi_getname";
    rc = fi_getname(&fep->ep->fid, name, &len);
    if (rc == 0 && (len == 0 || len > sizeof name))
        rc = -FI_ETOOSMALL;
    if (rc) {
        DAT2_ERR("%s: libfabric endpoint: %s: %s\n", this->name(), step, fi_text(rc));
        std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
        if (!mu_held)
            lock.lock();
        close_fep(*fep);
        return nullptr;
    }
    fep->name.assign(name, len);
    return fep;
}

void RdmTransport::close_fabric_eps_of(kit::Evd &evd) {
    drive_ias();
    std::vector<RdmDomain *> released;
    std::lock_guard<std::mutex> run(sweep_run_mu_);
    {
        // Closed under mu_, which the loop's progress round holds while it
        // reads queues, and under the locks of the endpoint's EVDs, which
        // their consumers hold: an endpoint's other queue may be shared with
        // endpoints that stay, and rxm's progress on a queue (reading it
        // drives every endpoint bound to it) crashes when it meets an
        // endpoint that fi_close is taking apart.
        std::lock_guard<std::mutex> lock(mu_);
        {
            // Their sweeps end with them (what the endpoint held goes too).
            std::lock_guard<std::mutex> sweeps_lock(sweeps_mu_);
            auto closing = [&](const RdmSweep &sw) {
                if (sw.fep->request_evd != &evd && sw.fep->recv_evd != &evd)
                    return false;
                retire(sw.block);
                return true;
            };
            sweeps_.erase(std::remove_if(sweeps_.begin(), sweeps_.end(), closing), sweeps_.end());
        }
        for (auto it = fabric_eps_.begin(); it != fabric_eps_.end();) {
            if (std::get<1>(it->first) == &evd || std::get<2>(it->first) == &evd) {
                EvdLocks consumers(it->second->request_evd, it->second->recv_evd);
                close_fep(*it->second);
                released.push_back(it->second->dom);
                it = fabric_eps_.erase(it);
            } else {
                ++it;
            }
        }
        for (auto it = stalled_feps_.begin(); it != stalled_feps_.end();) {
            if ((*it)->request_evd == &evd || (*it)->recv_evd == &evd) {
                EvdLocks consumers((*it)->request_evd, (*it)->recv_evd);
                close_fep(**it);
                released.push_back((*it)->dom);
                it = stalled_feps_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (RdmDomain *dom : released)
        domain_release(dom);
}

// ---- contexts ------------------------------------------------------------------------

// Inline: on every post's path (the rebuild is the rare branch).
__attribute__((always_inline)) inline RdmCtx *RdmTransport::take_ctx(RdmEp &rep, kit::Op &op) {
    kit::Ep &ep = *rep.owner;
    RdmCtxBlock *b = rep.block;
    if (!b || b->base != ep.ops.data() || b->n != ep.ops.size()) {
        // The EP's records were rebuilt (dat_ep_modify) since the block was made.
        std::lock_guard<std::mutex> lock(mu_);
        b = rep.block;
        if (!b || b->base != ep.ops.data() || b->n != ep.ops.size()) {
            retire_block(rep);
            rep.block = b = make_block(ep);
        }
    }
    const std::size_t index = static_cast<std::size_t>(&op - b->base);
    if (index >= b->n)
        return nullptr;
    RdmCtx &c = b->ctx[index];
    c.left = 1;
    c.status = DAT_DTO_SUCCESS;
    c.recv_posted.store(false, std::memory_order_relaxed);
    c.writes_memory.store(false, std::memory_order_relaxed);
    b->refs.fetch_add(1, std::memory_order_relaxed);
    return &c;
}

void RdmTransport::give_back_ctx(RdmCtx &c) {
    if (c.budget) {
        c.budget->release();
        c.budget = nullptr;
    }
    if (c.bounce) {
        RdmBounce::destroy(c.bounce);
        c.bounce = nullptr;
    }
    c.writes_memory.store(false, std::memory_order_relaxed);
    c.recv_posted.store(false, std::memory_order_relaxed);
    c.left = 0;
    c.block->release();
}

void RdmTransport::retire_block(RdmEp &rep) {
    RdmCtxBlock *b = rep.block;
    if (!b)
        return;
    rep.block = nullptr;
    retire(b);
}

void RdmTransport::retire(RdmCtxBlock *b) {
    b->retired.store(true, std::memory_order_release);
    // Nothing takes a reference to a retired block: one left is the list's.
    auto freed = [](RdmCtxBlock *r) {
        if (r->refs.load(std::memory_order_acquire) != 1)
            return false;
        r->release();
        return true;
    };
    retired_blocks_.erase(std::remove_if(retired_blocks_.begin(), retired_blocks_.end(), freed),
                          retired_blocks_.end());
    if (!freed(b))
        retired_blocks_.push_back(b);
}

void RdmTransport::cancel_receives(RdmEp &rep) {
    if (rep.fep && rep.block)
        cancel_posted(*rep.fep, *rep.block);
}

void RdmTransport::cancel_posted(RdmFabricEp &fep, const RdmCtxBlock &b) {
    for (std::size_t i = 0; i < b.n + 1; ++i)
        if (b.ctx[i].recv_posted.load(std::memory_order_relaxed))
            fi_cancel(&fep.ep->fid, &b.ctx[i].part[0]);
}

// ---- the address vector ---------------------------------------------------------------

// fi_av_insert reads as many bytes as the address format has (those of our
// own address), or a string up to its NUL: a peer's address from the side
// channel, which anyone can write to, is checked against that first.
bool RdmTransport::peer_address_fits(const std::string &peer, const std::string &own) const {
    if (info_->addr_format == FI_ADDR_STR)
        return !peer.empty() && std::memchr(peer.data(), '\0', peer.size()) != nullptr;
    return peer.size() == own.size();
}

int RdmTransport::av_insert(RdmDomain &dom, const std::string &name, fi_addr_t &out) {
    auto found = dom.av_entries.find(name);
    if (found != dom.av_entries.end()) {
        ++found->second.refs;
        out = found->second.addr;
        return 0;
    }
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    const int rc = fi_av_insert(dom.av, name.data(), 1, &addr, 0, nullptr);
    if (rc != 1) {
        DAT2_ERR("%s: fi_av_insert of a peer's address: %s\n", this->name(), rc < 0 ? fi_text(rc) : "not inserted");
        return rc < 0 ? rc : -FI_EINVAL;
    }
    dom.av_entries.emplace(name, RdmAvEntry{addr, 1});
    out = addr;
    return 0;
}

namespace {
// Names of the libfabric endpoints of this process that closed (for
// RdmTransport::maps_local_peers_), the oldest forgotten past kMax: an
// unused entry of an address vector is removed long before that many
// endpoints of the process have closed (kAvIdleEntries).
struct DepartedEndpoints {
    static constexpr std::size_t kMax = 65536;
    std::mutex mu; // taken last: nothing is locked under it
    std::unordered_set<std::string> names;
    std::deque<std::string> order;
    std::uint64_t count = 0; // names ever noted
};
DepartedEndpoints &departed_endpoints() {
    static auto *d = new DepartedEndpoints;
    return *d;
}
// A child forked while another thread held the lock gets it free. Registered
// at load, as the kit's locks.
[[maybe_unused]] const int fork_handlers =
    pthread_atfork([] { departed_endpoints().mu.lock(); }, [] { departed_endpoints().mu.unlock(); },
                   [] { departed_endpoints().mu.unlock(); });
bool departed(const std::string &name) {
    DepartedEndpoints &d = departed_endpoints();
    std::lock_guard<std::mutex> lock(d.mu);
    return d.names.count(name) != 0;
}
} // namespace

void RdmTransport::note_departed(const RdmFabricEp &fep) {
    if (!maps_local_peers_ || fep.name.empty())
        return;
    DepartedEndpoints &d = departed_endpoints();
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.names.insert(fep.name).second)
        return;
    d.order.push_back(fep.name);
    ++d.count;
    if (d.order.size() > DepartedEndpoints::kMax) {
        d.names.erase(d.order.front());
        d.order.pop_front();
    }
}

void RdmTransport::forget_departed_peers(RdmDomain &dom) {
    if (!maps_local_peers_)
        return;
    std::vector<fi_addr_t> gone;
    {
        DepartedEndpoints &d = departed_endpoints();
        std::lock_guard<std::mutex> lock(d.mu);
        if (dom.departures_seen == d.count)
            return;
        dom.departures_seen = d.count;
        for (auto it = dom.av_entries.begin(); it != dom.av_entries.end();) {
            // One a connection still uses goes when that connection ends (av_release).
            if (it->second.refs == 0 && d.names.count(it->first)) {
                gone.push_back(it->second.addr);
                it = dom.av_entries.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (fi_addr_t addr : gone)
        fi_av_remove(dom.av, &addr, 1, 0);
}

// An entry no connection uses stays: a provider may still have operations
// for the peer in flight (rxm crashes in its progress after fi_av_remove of
// a peer it has a connection to), and the next connection to the same peer
// finds it. Entries are removed once more than kAvIdleEntries are unused,
// the oldest first.
void RdmTransport::av_release(RdmDomain &dom, const std::string &name) {
    auto found = dom.av_entries.find(name);
    if (found == dom.av_entries.end() || --found->second.refs > 0)
        return;
    if (maps_local_peers_ && departed(name)) {
        fi_addr_t addr = found->second.addr;
        fi_av_remove(dom.av, &addr, 1, 0);
        dom.av_entries.erase(found);
        return;
    }
    dom.av_idle.push_back(name);
    while (dom.av_idle.size() > kAvIdleEntries) {
        auto old = dom.av_entries.find(dom.av_idle.front());
        dom.av_idle.pop_front();
        if (old == dom.av_entries.end() || old->second.refs > 0)
            continue;
        fi_addr_t addr = old->second.addr;
        fi_av_remove(dom.av, &addr, 1, 0);
        dom.av_entries.erase(old);
    }
}

DAT_RETURN RdmTransport::attach_peer(RdmEp &rep, const std::string &peer_name, std::uint64_t peer_tag,
                                     std::uint8_t peer_pz_tag) {
    fi_addr_t addr;
    if (!rep.fep)
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    if (!peer_address_fits(peer_name, rep.fep->name)) {
        DAT2_ERR("%s: a peer's fabric address of %zu bytes does not fit this provider's (ours: %zu bytes%s)\n",
                 name(), peer_name.size(), rep.fep->name.size(), info_->addr_format == FI_ADDR_STR ? ", a string" : "");
        return DAT_ERROR(DAT_INVALID_PARAMETER, 0);
    }
    if (int rc = av_insert(*rep.fep->dom, peer_name, addr))
        return to_dat(rc, DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    rep.peer = addr;
    rep.peer_dom = rep.fep->dom;
    rep.peer_name = peer_name;
    rep.peer_tag = peer_tag;
    rep.peer_pz_tag = pz_tags_ ? peer_pz_tag : 0;
    ++connected_;
    return DAT_SUCCESS;
}

// A provider's bug, not an attribute: by name. Elsewhere the provider
// truncates (rxm, tcp: tested), and the sweeps' receives are empty.
void RdmTransport::open_scratch() {
    if (std::strcmp(info_->fabric_attr->prov_name, "shm") != 0 || (info_->domain_attr->mr_mode & FI_MR_LOCAL))
        return;
    const std::size_t len = static_cast<std::size_t>(max_message_size(*info_));
    void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        DAT2_ERR("%s: reserving %zu bytes for messages longer than their receive: %s; a receive shorter than a "
                 "message shm moves by CMA will not complete\n",
                 name(), len, std::strerror(errno));
        return;
    }
    scratch_ = p;
    scratch_len_ = len;
    recv_iov_limit_ = std::min<std::size_t>(info_->rx_attr->iov_limit, kit::kMaxIov);
}

// A receive of as many segments as the provider takes has no room for the
// scratch behind them; segments that follow each other in memory (one
// buffer cut in pieces, as dapltest's) are joined into one, which places
// every byte where the consumer's segments would, and frees a place.
namespace {
std::size_t join_adjacent(iovec *iov, void **desc, std::size_t count) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < count; ++i) {
        if (out > 0 && desc[out - 1] == desc[i] &&
            static_cast<char *>(iov[out - 1].iov_base) + iov[out - 1].iov_len == iov[i].iov_base) {
            iov[out - 1].iov_len += iov[i].iov_len;
            continue;
        }
        iov[out] = iov[i];
        desc[out++] = desc[i];
    }
    return out;
}
} // namespace

RdmBounce *RdmBounce::make(const iovec *last_two, std::size_t skip) {
    const std::size_t len = last_two[0].iov_len + last_two[1].iov_len;
    if (len < last_two[0].iov_len || len > SIZE_MAX - sizeof(RdmBounce))
        return nullptr;
    auto *b = static_cast<RdmBounce *>(std::malloc(sizeof(RdmBounce) + len));
    if (!b)
        return nullptr;
    b->to[0] = last_two[0];
    b->to[1] = last_two[1];
    b->skip = skip;
    return b;
}

void RdmBounce::copy_out(std::size_t received) {
    std::size_t left = received > skip ? std::min(received - skip, length()) : 0;
    const unsigned char *from = data();
    for (const iovec &t : to) {
        const std::size_t k = std::min(left, t.iov_len);
        std::memcpy(t.iov_base, from, k);
        from += k;
        left -= k;
    }
}

void RdmTransport::finish_bounce(RdmCtx &c, std::size_t len, DAT_DTO_COMPLETION_STATUS status) {
    if (status == DAT_DTO_SUCCESS && !c.block->retired.load(std::memory_order_acquire))
        c.bounce->copy_out(len);
    RdmBounce::destroy(c.bounce);
    c.bounce = nullptr;
}

void RdmTransport::sweep_ended(RdmEp &rep) {
    if (!rep.fep || !rep.tag || rep.swept_tag == rep.tag)
        return;
    rep.swept_tag = rep.tag;
    // Two sweeps, the data tag and the hello's, each matched exactly (ignore
    // 0): shm 1.17 matches a posted receive against a message that came
    // before it with the ignore mask its entry kept from an earlier receive
    // (smr_get_tag sets no mask), so ignore bits in one receive of ours
    // would let a later one take a message not meant for it.
    for (const std::uint64_t bit : {std::uint64_t(0), kHelloBit}) {
        RdmSweep sw;
        sw.fep = rep.fep;
        sw.tag = rep.tag | bit;
        sw.block = make_block(nullptr, 0);
        sw.until_ns = (std::chrono::steady_clock::now() + kSweepFor).time_since_epoch().count();
        std::lock_guard<std::mutex> lock(sweeps_mu_);
        sweeps_.push_back(sw);
    }
    loop().post([] {}); // a round now, not after a quiet loop's wait
}

// One receive at a time, into the scratch buffer: one that matched goes
// again, one that found nothing is cancelled and ends the sweep. Its
// completions are read through the EVD, where translate drops them (the
// block has no records).
bool RdmTransport::sweep_step(RdmSweep &sw, std::int64_t now_ns, std::vector<kit::Evd *> &wake) {
    RdmFabricEp &fep = *sw.fep;
    RdmCtx &c = sw.block->ctx[0];
    auto collect = [&] {
        if (fep.rx_q) {
            if (kit::evd_collect(*fep.rx_q->evd))
                wake.push_back(fep.rx_q->evd);
            return;
        }
        std::lock_guard<std::mutex> lock(dom_mu_);
        if (binding_.load(std::memory_order_seq_cst) == 0)
            drop_null_queue(*fep.dom);
    };
    if (now_ns < sw.not_before_ns)
        return false;
    for (int i = 0; i < kSweepsPerRound; ++i) {
        // A receive that never completes (a message in segments from a peer
        // that died) holds the sweep no longer than the rest: its block
        // stays retired until the transport goes.
        if (now_ns > sw.until_ns)
            return true;
        if (sw.posted) {
            collect();
            if (c.recv_posted.load(std::memory_order_acquire) && !sw.cancelled) {
                fi_cancel(&fep.ep->fid, &c.part[0]);
                sw.cancelled = true;
                collect();
            }
            if (c.recv_posted.load(std::memory_order_acquire))
                return false; // its completion comes later
            if (sw.cancelled && c.status == DAT_DTO_ERR_FLUSHED) {
                if (sw.passes_left == 0)
                    return true;
                // Once more a while later: what the fabric still carried
                // behind the side channel's news of the end (rxm's tcp).
                --sw.passes_left;
                sw.posted = false;
                sw.not_before_ns = now_ns + std::chrono::nanoseconds(kSweepAgainAfter).count();
                return false;
            }
        }
        c.status = DAT_DTO_SUCCESS;
        c.left = 1;
        sw.cancelled = false;
        sw.block->refs.fetch_add(1, std::memory_order_relaxed);
        c.recv_posted.store(true, std::memory_order_relaxed);
        iovec iov{scratch_, scratch_len_};
        void *desc = nullptr;
        iovec none[1];
        const std::size_t count = scratch_ ? 1 : rdm_iov(nullptr, 0, none, &desc);
        fi_msg_tagged msg{scratch_ ? &iov : none, &desc, count, FI_ADDR_UNSPEC, sw.tag, 0, &c.part[0], 0};
        scratch_written_.store(true, std::memory_order_relaxed);
        if (const ssize_t rc = fi_trecvmsg(fep.ep, &msg, FI_COMPLETION)) {
            c.recv_posted.store(false, std::memory_order_relaxed);
            sw.block->release();
            if (rc == -FI_EAGAIN)
                return false;
            DAT2_LOG(log::kGeneric, "%s: taking what an ended connection left unreceived: %s\n", name(),
                     fi_text(static_cast<int>(rc)));
            return true;
        }
        sw.posted = true;
    }
    return false;
}

bool RdmTransport::run_sweeps(std::vector<kit::Evd *> &wake) {
    std::lock_guard<std::mutex> run(sweep_run_mu_);
    std::vector<RdmSweep> mine;
    {
        std::lock_guard<std::mutex> lock(sweeps_mu_);
        mine.swap(sweeps_);
    }
    if (mine.empty()) {
        // What oversized messages and sweeps wrote into the scratch buffer
        // goes back (a receive writing there meanwhile writes garbage anyway).
        if (scratch_written_.exchange(false, std::memory_order_relaxed) && scratch_)
            ::madvise(scratch_, scratch_len_, MADV_DONTNEED);
        return false;
    }
    const std::int64_t now_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    std::vector<RdmCtxBlock *> finished;
    std::size_t keep = 0;
    for (RdmSweep &sw : mine) {
        if (sweep_step(sw, now_ns, wake))
            finished.push_back(sw.block);
        else
            mine[keep++] = sw;
    }
    mine.resize(keep);
    if (!finished.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (RdmCtxBlock *b : finished)
            retire(b);
    }
    std::lock_guard<std::mutex> lock(sweeps_mu_);
    sweeps_.insert(sweeps_.end(), mine.begin(), mine.end());
    return !sweeps_.empty();
}

void RdmTransport::end_data_path(RdmEp &rep) {
    rep.recv_refused.store(false, std::memory_order_relaxed);
    cancel_receives(rep);
    sweep_ended(rep);
    drop_deferred(rep);
    // A manual-progress provider (rxm) serves a peer's rendezvous read of
    // our sends, and completes our cancelled or matched receives, only
    // while someone reads its queues: a consumer that now waits only on its
    // connection EVD, or the peer waiting for its receives' buffers
    // (Transport::ops_writing_memory), needs the loop's rounds to go on for
    // a while after the last connection ended. Bounded: a send the peer
    // never matches would keep them going for ever.
    if (rep.block && rep.block->refs.load(std::memory_order_relaxed) > 1)
        linger_until_ns_ = (std::chrono::steady_clock::now() + kLingerProgress).time_since_epoch().count();
    if (!rep.peer_name.empty()) {
        av_release(*rep.peer_dom, rep.peer_name);
        rep.peer_name.clear();
        rep.peer_dom = nullptr;
        --connected_;
    }
    loop().disarm(rep.disconnect_timer);
    rep.graceful_pending = false;
    rep.draining = false;
}

void RdmTransport::break_stalled(RdmEp &rep, std::vector<kit::ConnectionReport> &broken, bool unanswered) {
    if (rep.block)
        rep.block->peer_stalled.store(true, std::memory_order_relaxed);
    broken.emplace_back();
    RdmConn *c = detach_conn(rep.conn);
    end_data_path(rep);
    broken.back().disconnected(*rep.owner, true, unanswered);
    dead_conns_.push_back(c);
}

void RdmTransport::retire_stalled(RdmFabricEp *fep, std::vector<kit::ConnectionReport> &broken) {
    if (!fep)
        return;
    auto it = std::find_if(fabric_eps_.begin(), fabric_eps_.end(),
                           [fep](const auto &entry) { return entry.second.get() == fep; });
    if (it == fabric_eps_.end())
        return; // retired already
    stalled_feps_.push_back(std::move(it->second));
    fabric_eps_.erase(it);
    int others = 0;
    for (auto &[id, rep] : eps_) {
        if (rep->fep != fep || !rep->conn)
            continue;
        const DAT_EP_STATE s = kit::ep_state(*rep->owner);
        if (s != DAT_EP_STATE_CONNECTED && s != DAT_EP_STATE_DISCONNECT_PENDING)
            continue;
        break_stalled(*rep, broken, false);
        ++others;
    }
    DAT2_ERR("%s: the libfabric endpoint of that EP (shared by the EPs of its PZ and pair of EVDs) is retired: "
             "the provider may hold everything it sends after the unanswered operation; %d other connection%s on "
             "it broken; new connections get a new endpoint\n",
             name(), others, others == 1 ? "" : "s");
}

// ---- posts ------------------------------------------------------------------------------

bool RdmTransport::remote_key(const RdmEp &rep, DAT_RMR_CONTEXT ctx, std::uint64_t &key) const {
    if (!rep.peer_pz_tag) {
        key = ctx;
        return true;
    }
    key = ctx & kKeyMask;
    const unsigned tag = ctx >> kKeyBits;
    if (tag == rep.peer_pz_tag)
        return true;
    DAT2_LOG(log::kGeneric,
             "%s: EP %p: rmr_context %#x names a memory region or window of another protection zone than the "
             "peer Endpoint's (its tag %u, the peer's %u): refused\n",
             name(), (void *)rep.owner, static_cast<unsigned>(ctx), tag, unsigned(rep.peer_pz_tag));
    return false;
}

void RdmTransport::request_unposted(RdmEp &rep, kit::PostKind kind) {
    rep.requests_out.fetch_sub(1, std::memory_order_relaxed);
    if (kind != kit::PostKind::kSend)
        rep.rma_out.fetch_sub(1, std::memory_order_relaxed);
}

void RdmTransport::rma_posted(RdmEp &rep) {
    if (rep.rma_out.fetch_add(1, std::memory_order_relaxed) != 0)
        return;
    rep.rma_stamp_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(rma_watch_mu_);
    rma_watch_.push_back(rep.id);
}

void RdmTransport::nudge(RdmEp &rep) {
    // Most calls come within kNudgeEvery of the last nudge: those take no lock.
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (now - rep.nudged_ns.load(std::memory_order_relaxed) < std::chrono::nanoseconds(kNudgeEvery).count())
        return;
    std::lock_guard<std::mutex> lock(mu_);
    nudge_locked(rep);
}

void RdmTransport::nudge_locked(RdmEp &rep) {
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    std::int64_t last = rep.nudged_ns.load(std::memory_order_relaxed);
    if (now - last < std::chrono::nanoseconds(kNudgeEvery).count() ||
        !rep.nudged_ns.compare_exchange_strong(last, now, std::memory_order_relaxed))
        return;
    RdmConn *c = rep.conn ? conn_by_id(rep.conn) : nullptr;
    if (c && (c->state == RdmConn::kConnected || c->state == RdmConn::kAwaitReady)) {
        rdmwire::Message m;
        m.kind = rdmwire::kNudge;
        send_message(*c, m);
    }
}

void RdmTransport::hello(RdmEp &rep) {
    // Called without mu_: the loop may end the connection meanwhile and
    // dat_ep_free retire the EP's block, and the peer's address-vector
    // entry must outlive these posts (rxm crashes posting to an address
    // removed from its vector; see av_release). Both are taken under mu_.
    RdmFabricEp *fep = nullptr;
    RdmCtxBlock *b = nullptr;
    RdmDomain *dom = nullptr;
    std::string peer;
    {
        std::lock_guard<std::mutex> lock(mu_);
        fep = rep.fep;
        b = rep.block;
        if (!fep || !b || rep.peer_name.empty() || !rep.peer_dom)
            return; // the connection ended before its first message
        dom = rep.peer_dom;
        peer = rep.peer_name;
        fi_addr_t pinned;
        if (av_insert(*dom, peer, pinned) != 0)
            return;
        b->refs.fetch_add(1, std::memory_order_relaxed);
    }
    struct Unpin {
        RdmTransport &t;
        RdmDomain &dom;
        const std::string &peer;
        ~Unpin() {
            std::lock_guard<std::mutex> lock(t.mu_);
            t.av_release(dom, peer);
        }
    } unpin{*this, *dom, peer};
    RdmCtx &r = b->ctx[b->n + kHelloRecv];
    r.left = 1;
    iovec none[1];
    void *none_desc[1];
    const std::size_t count = rdm_iov(nullptr, 0, none, none_desc);
    fi_msg_tagged rmsg{none, none_desc, count, directed_recv_ ? rep.peer : FI_ADDR_UNSPEC, rep.tag | kHelloBit, 0,
                       &r.part[0], 0};
    r.recv_posted.store(true, std::memory_order_relaxed);
    if (post_retrying(rep, [&] { return fi_trecvmsg(fep->ep, &rmsg, FI_COMPLETION); }) != 0) {
        r.recv_posted.store(false, std::memory_order_relaxed);
        b->release();
    }
    // Injected: a send completion would wait in the EP's request queue
    // until its consumer reads that queue, and the block with it; a
    // consumer that never posts a request would keep one block (and one
    // provider queue entry) per connection for ever. The peer answers once
    // nudged, or within its next progress round, or it is busy: a bound of
    // its own, not the post path's.
    const ssize_t rc = post_retrying(
        rep, [&] { return fi_tinject(fep->ep, &rdm_no_byte, 0, rep.peer, rep.peer_tag | kHelloBit); },
        std::chrono::milliseconds(1000));
    if (rc != 0) {
        DAT2_LOG(log::kGeneric, "%s: EP %p: the connection's first message was not taken: %s\n", name(),
                 (void *)rep.owner, fi_text(static_cast<int>(rc)));
    }
}

// One attempt at handing a send, RDMA write or read to the provider.
inline ssize_t RdmTransport::submit(RdmEp &rep, kit::PostKind kind, RdmCtx &c, const iovec *iov, void **desc,
                                    std::size_t n, std::uint64_t flags, std::uint64_t data, const fi_rma_iov *rma) {
    fid_ep *ep = rep.fep->ep;
    if (kind == kit::PostKind::kSend) {
        fi_msg_tagged msg{iov, desc, n, rep.peer, rep.peer_tag, 0, &c.part[0], data};
        return fi_tsendmsg(ep, &msg, flags);
    }
    fi_msg_rma msg{iov, desc, n, rep.peer, rma, 1, &c.part[0], 0};
    if (kind == kit::PostKind::kRdmaWrite)
        return fi_writemsg(ep, &msg, flags); // with rdm_write_flags()
    return fi_readmsg(ep, &msg, FI_COMPLETION);
}

void RdmTransport::defer(RdmEp &rep, RdmDeferred &&d) {
    {
        std::lock_guard<std::mutex> g(rep.defer_mu);
        rep.deferred.push_back(std::move(d));
        rep.has_deferred.store(true, std::memory_order_release);
    }
    DAT2_LOG(log::kGeneric, "%s: EP %p: the provider still refuses a request after %lld ms (the peer does not "
             "progress); it waits in the EP's queue\n",
             name(), (void *)rep.owner, static_cast<long long>(kPostBound.count()));
    std::lock_guard<std::mutex> lock(rma_watch_mu_);
    deferred_eps_.push_back(rep.id);
}

void RdmTransport::drive_queues(RdmFabricEp &fep) {
    for (RdmCq *q : {fep.tx_q, fep.rx_q == fep.tx_q ? nullptr : fep.rx_q}) {
        if (!q || !q->evd->mu.try_lock())
            continue;
        fi_cq_tagged_entry none;
        fi_cq_read(q->cq, &none, 0);
        q->evd->mu.unlock();
    }
}

bool RdmTransport::drain_deferred(RdmEp &rep) {
    while (!rep.deferred.empty()) {
        RdmDeferred &d = rep.deferred.front();
        drive_queues(*rep.fep);
        const ssize_t rc = submit(rep, d.kind, *d.ctx, d.iov, d.desc, d.nsegs, d.flags, d.data, &d.rma);
        if (rc == -FI_EAGAIN)
            return false;
        if (rc == 0 && d.kind == kit::PostKind::kSend)
            rep.msgs_out.fetch_add(1, std::memory_order_relaxed);
        if (rc) {
            // Taken as posted: only the connection's end completes it now
            // (the kit flushes it).
            DAT2_ERR("%s: EP %p: posting a waiting request: %s; the connection is broken\n", name(),
                     (void *)rep.owner, fi_text(static_cast<int>(rc)));
            request_unposted(rep, d.kind);
            give_back_ctx(*d.ctx);
            break_connection_later(rep.id);
        }
        rep.deferred.pop_front();
    }
    rep.has_deferred.store(false, std::memory_order_release);
    return true;
}

void RdmTransport::drop_deferred(RdmEp &rep) {
    std::lock_guard<std::mutex> g(rep.defer_mu);
    for (RdmDeferred &d : rep.deferred) {
        request_unposted(rep, d.kind);
        give_back_ctx(*d.ctx);
    }
    rep.deferred.clear();
    rep.has_deferred.store(false, std::memory_order_release);
}

// A post libfabric refused: its context back, and the answer.
DAT_RETURN RdmTransport::post_failed(RdmCtx &c, ssize_t rc) {
    give_back_ctx(c);
    return refused_post(name(), "a DTO", rc);
}

// A post's start: the EP has its fabric endpoint, and `op` a context.
__attribute__((always_inline)) inline DAT_RETURN RdmTransport::post_context(RdmEp &rep, kit::Op &op, RdmCtx *&c) {
    if (!rep.fep)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    c = take_ctx(rep, op);
    if (!c)
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::post_recv(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                   DAT_COMPLETION_FLAGS) {
    RdmEp &rep = rep_of(ep);
    RdmCtx *c;
    if (DAT_RETURN r = post_context(rep, op, c))
        return r;
    RdmFabricEp *fep = rep.fep;
    if (!fep->recv_budget->take()) {
        give_back_ctx(*c);
        DAT2_ERR("%s: EP %p: a receive refused: the EPs of its pair of EVDs hold %ld, all its libfabric endpoint "
                 "takes\n",
                 name(), (void *)&ep, fep->recv_budget->capacity);
        // One the consumer posted before the connection (ep_transport_ready
        // posts them) was answered DAT_SUCCESS: the connection ends, and the
        // kit flushes it with the others, rather than leave it unfilled.
        if (!ep.transport_ready.load(std::memory_order_acquire))
            rep.recv_refused.store(true, std::memory_order_release);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
    }
    c->budget = fep->recv_budget;
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    std::size_t count = rdm_iov(segs, nsegs, iov, desc);
    if (count == recv_iov_limit_ && scratch_)
        count = join_adjacent(iov, desc, count);
    if (__builtin_expect(count == recv_iov_limit_ && scratch_ && count >= 2, 0)) {
        // Still no room for the scratch buffer: the last two segments go
        // through a buffer of ours, which frees a place (a copy, for a
        // receive of segments apart from each other, which DAT programs
        // rarely post).
        std::size_t skip = 0;
        for (std::size_t i = 0; i + 2 < count; ++i)
            skip += iov[i].iov_len;
        RdmBounce *b = RdmBounce::make(&iov[count - 2], skip);
        if (!b) {
            give_back_ctx(*c);
            DAT2_ERR("%s: no memory for a receive's bounce buffer of %zu bytes\n", name(),
                     iov[count - 2].iov_len + iov[count - 1].iov_len);
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        }
        c->bounce = b;
        iov[count - 2] = {b->data(), b->length()};
        desc[count - 2] = nullptr;
        --count;
    }
    if (count < recv_iov_limit_) {
        iov[count] = {scratch_, scratch_len_};
        desc[count++] = nullptr;
    }
    fi_msg_tagged msg{iov, desc, count, directed_recv_ ? rep.peer : FI_ADDR_UNSPEC, rep.tag, 0, &c->part[0], 0};
    c->recv_posted.store(true, std::memory_order_relaxed);
    writes_memory(*c);
    if (const ssize_t rc = post_retrying(rep, [&] { return fi_trecvmsg(fep->ep, &msg, FI_COMPLETION); }))
        return post_failed(*c, rc);
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::post(kit::Ep &ep, kit::PostKind kind, kit::Op &op, const kit::Segment *segs, int nsegs,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS) {
    RdmEp &rep = rep_of(ep);
    std::uint64_t key = 0;
    if ((kind == kit::PostKind::kRdmaWrite || kind == kit::PostKind::kRdmaRead) &&
        !remote_key(rep, remote->rmr_context, key))
        return DAT_ERROR(DAT_PROTECTION_VIOLATION, 0);
    RdmCtx *c;
    if (DAT_RETURN r = post_context(rep, op, c))
        return r;
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    std::uint64_t total;
    const std::size_t count = rdm_iov(segs, nsegs, iov, desc, &total);
    rep.requests_out.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t flags = FI_COMPLETION, data = 0;
    fi_rma_iov rma{};
    if (kind == kit::PostKind::kSend) {
        if (remote) {
            // Send with invalidate: the context travels as remote CQ data.
            data = remote->rmr_context;
            flags |= FI_REMOTE_CQ_DATA;
        }
        if (fence_after_write_ && rep.wrote.load(std::memory_order_relaxed) &&
            rep.wrote.exchange(false, std::memory_order_relaxed))
            flags |= FI_FENCE;
    } else {
        rma = {remote->virtual_address, total, key}; // as long as the data (OfiTransport::post)
        rma_posted(rep);
        if (kind == kit::PostKind::kRdmaWrite) {
            flags = rdm_write_flags(total);
            if (fence_after_write_)
                rep.wrote.store(true, std::memory_order_relaxed);
        } else {
            writes_memory(*c);
        }
    }
    auto record = [&] {
        RdmDeferred d;
        d.kind = kind;
        d.ctx = c;
        d.flags = flags;
        d.data = data;
        d.rma = rma;
        d.nsegs = count;
        std::copy(iov, iov + count, d.iov);
        std::copy(desc, desc + count, d.desc);
        return d;
    };
    if (rep.has_deferred.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> g(rep.defer_mu);
        if (!drain_deferred(rep)) {
            rep.deferred.push_back(record()); // behind the others: the loop goes on with them
            return DAT_SUCCESS;
        }
    }
    const ssize_t rc =
        post_retrying(rep, [&] { return submit(rep, kind, *c, iov, desc, count, flags, data, &rma); });
    if (rc == -FI_EAGAIN) {
        defer(rep, record());
        return DAT_SUCCESS;
    }
    if (rc) {
        request_unposted(rep, kind);
        return post_failed(*c, rc);
    }
    if (kind == kit::PostKind::kSend)
        rep.msgs_out.fetch_add(1, std::memory_order_relaxed);
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::post_ext(kit::Ep &ep, kit::Op &op, const kit::Segment *segs, int nsegs,
                                  const DAT_RMR_TRIPLET &remote, DAT_COMPLETION_FLAGS) {
    RdmEp &rep = rep_of(ep);
    if (!rep.fep)
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    if (op.ext != kit::ExtKind::kRdmaWriteImmed && op.ext != kit::ExtKind::kFetchAdd &&
        op.ext != kit::ExtKind::kCmpSwap)
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (op.ext != kit::ExtKind::kRdmaWriteImmed && nsegs != 1)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    std::uint64_t key = 0;
    if (!remote_key(rep, remote.rmr_context, key))
        return DAT_ERROR(DAT_PROTECTION_VIOLATION, 0);
    if (rep.has_deferred.load(std::memory_order_acquire)) {
        // Not queued (RdmEp::deferred): it may not overtake what waits.
        std::lock_guard<std::mutex> g(rep.defer_mu);
        if (!drain_deferred(rep))
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
    }
    RdmCtx *c = take_ctx(rep, op);
    if (!c)
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    rep.requests_out.fetch_add(1, std::memory_order_relaxed);
    rma_posted(rep);
    DAT_RETURN r = op.ext == kit::ExtKind::kRdmaWriteImmed ? post_write_immed(rep, *c, op, segs, nsegs, remote, key)
                                                           : post_atomic(rep, *c, op, segs[0], remote, key);
    if (r != DAT_SUCCESS) {
        request_unposted(rep, kit::PostKind::kRdmaWrite); // an RMA either way
        give_back_ctx(*c);
    }
    return r;
}

// A write with immediate data is the RDMA write, then an empty message to the
// peer's tag whose remote CQ data carries the immediate data and the written
// length: it consumes the target's oldest receive, as InfiniBand's does, and
// arrives after the data (FI_ORDER_SAW, or FI_FENCE). The DTO completes once
// both have.
DAT_RETURN RdmTransport::post_write_immed(RdmEp &rep, RdmCtx &c, kit::Op &op, const kit::Segment *segs, int nsegs,
                                          const DAT_RMR_TRIPLET &remote, std::uint64_t key) {
    iovec iov[kit::kMaxIov];
    void *desc[kit::kMaxIov];
    std::uint64_t total = 0;
    const std::size_t count = rdm_iov(segs, nsegs, iov, desc, &total);
    if (total > kMaxImmedLength)
        return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    c.left = 2;
    fi_rma_iov rma{remote.virtual_address, total, key};
    fi_msg_rma wmsg{iov, desc, count, rep.peer, &rma, 1, &c.part[0], 0};
    ssize_t rc = post_retrying(rep, [&] { return fi_writemsg(rep.fep->ep, &wmsg, rdm_write_flags(total)); });
    if (rc) {
        c.left = 1;
        if (rc == -FI_EAGAIN)
            return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0);
        DAT2_ERR("%s: posting the write of a write with immediate data: %s\n", name(), fi_text(static_cast<int>(rc)));
        return to_dat(static_cast<int>(rc), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    // The reference of the second part.
    c.block->refs.fetch_add(1, std::memory_order_relaxed);
    iovec none[1];
    void *none_desc[1];
    fi_msg_tagged smsg{none, none_desc, rdm_iov(nullptr, 0, none, none_desc), rep.peer, rep.peer_tag, 0, &c.part[1],
                       immed_cq_data(total, op.immed)};
    const std::uint64_t flags = FI_COMPLETION | FI_REMOTE_CQ_DATA | (fence_after_write_ ? FI_FENCE : 0);
    rc = post_retrying(rep, [&] { return fi_tsendmsg(rep.fep->ep, &smsg, flags); });
    if (rc == 0) {
        rep.msgs_out.fetch_add(1, std::memory_order_relaxed);
        return DAT_SUCCESS;
    }
    // The write is on its way and cannot be taken back, and its completion
    // may be read on another thread right now: `c` is left as it is (the
    // write's completion finds the second part still out and reports
    // nothing), and the connection ends, as after any failed request; the
    // kit flushes the DTO.
    DAT2_ERR("%s: EP %p: posting the immediate data of a write with immediate data: %s; the connection is "
             "broken\n",
             name(), (void *)rep.owner, fi_text(static_cast<int>(rc)));
    c.block->release();
    request_unposted(rep, kit::PostKind::kRdmaWrite);
    break_connection_later(rep.id);
    return DAT_SUCCESS;
}

DAT_RETURN RdmTransport::post_atomic(RdmEp &rep, RdmCtx &c, kit::Op &op, const kit::Segment &result,
                                     const DAT_RMR_TRIPLET &remote, std::uint64_t key) {
    const bool cswap = op.ext == kit::ExtKind::kCmpSwap;
    // The operands live in the DTO record until it completes.
    fi_ioc operand{&op.operand[cswap ? 1 : 0], 1};
    void *operand_desc = nullptr;
    fi_rma_ioc target{remote.virtual_address, 1, key};
    fi_msg_atomic msg{};
    msg.msg_iov = &operand;
    msg.desc = &operand_desc;
    msg.iov_count = 1;
    msg.addr = rep.peer;
    msg.rma_iov = &target;
    msg.rma_iov_count = 1;
    msg.datatype = FI_UINT64;
    msg.op = cswap ? FI_CSWAP : FI_SUM;
    msg.context = &c.part[0];
    fi_ioc original{result.addr, 1};
    void *original_desc = result.desc;
    writes_memory(c);
    ssize_t rc;
    if (cswap) {
        fi_ioc compare{&op.operand[0], 1};
        void *compare_desc = nullptr;
        rc = post_retrying(rep, [&] {
            return fi_compare_atomicmsg(rep.fep->ep, &msg, &compare, &compare_desc, 1, &original, &original_desc, 1,
                                        FI_COMPLETION);
        });
    } else {
        rc = post_retrying(rep, [&] {
            return fi_fetch_atomicmsg(rep.fep->ep, &msg, &original, &original_desc, 1, FI_COMPLETION);
        });
    }
    if (rc == 0)
        return DAT_SUCCESS;
    return refused_post(name(), "an atomic operation", rc);
}

} // namespace dat2::ofi
