// SPDX-License-Identifier: BSD-3-Clause
#include "registry.hpp"

#include "dat2_version.h"
#include "descriptors.hpp"
#include "log.hpp"
#include "names.hpp"
#include "static_config.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

namespace dat2::registry {

// Every provider table ever registered (registry.hpp).
std::atomic<const DAT_PROVIDER *> g_known[kMaxKnownProviders];
std::atomic<std::size_t> g_known_count{0};
std::atomic<const DAT_PROVIDER *> g_guarded_first{nullptr};
std::atomic<std::uintptr_t> g_mapped_pages[kMappedPages];

bool probe_mapped(const void *p) noexcept {
    // Set when the kernel will not answer: every handle is then trusted to
    // be mapped, as before the check, without a system call each time.
    static std::atomic<bool> unchecked{false};
    if (unchecked.load(std::memory_order_relaxed))
        return true;
    // process_vm_readv on ourselves fails with EFAULT where a load would
    // fault, and reads nothing into our memory that a load would not.
    void *word[1];
    iovec local{word, sizeof word};
    iovec remote{const_cast<void *>(p), sizeof word};
    const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(sizeof word))
        return true;
    if (n >= 0 || errno == EFAULT) // a word read in part ends in unmapped memory
        return false;
    // A seccomp filter or an old kernel: EPERM, ENOSYS.
    if (!unchecked.exchange(true))
        DAT2_LOG(log::kGeneric, "process_vm_readv: %s: handles are not checked against unmapped memory",
                 std::strerror(errno));
    return true;
}

namespace {

// Consumer IA handles are small integers below every mappable address, so
// they can never be mistaken for a provider's pointer.
constexpr std::size_t kMaxIaHandles = 4096;

struct StaticEntry {
    ConfEntry conf;
    DAT_PROVIDER_INFO info{};
    // Loaded once and kept: code of a finalized provider may still be on the
    // stack of a thread that a close just woke (dat_evd_wait returning
    // DAT_ABORT), so the registry never unmaps it.
    std::unique_ptr<ProviderLibrary> library;
    bool initialized = false;
    unsigned open_ias = 0; // IAs and extension handles held through this entry
};

struct DynamicEntry {
    const DAT_PROVIDER *provider = nullptr;
    DAT_PROVIDER_INFO info{};
    unsigned open_ias = 0;        // IAs plus extension handles (below)
    unsigned extension_refs = 0;  // held by DAT_OPEN_EXTENSION_BASE ops
    StaticEntry *owner = nullptr; // the dat.conf entry that registered it
};

struct IaSlot {
    DAT_IA_HANDLE provider_ia = nullptr;
    DynamicEntry *provider = nullptr;
    bool closing = false;
    bool reserved = false; // held for an ia_open in progress

    bool free() const { return !provider_ia && !reserved; }
};

// Two locks, taken in this order and never the other way:
//  - load_mu serializes reading dat.conf, loading libraries and calling
//    dat_provider_init/fini (recursive: an init may open another IA);
//  - table_mu guards the dynamic registry, the IA handle table and the
//    reference counts, and is never held while any provider code runs.
// Provider callbacks (add/remove_provider, dats_get_ia_handle) take only
// table_mu, so they work from any thread, even during an init.
struct State {
    std::recursive_mutex load_mu;
    std::mutex table_mu;
    bool config_loaded = false;
    bool no_static_registry = false; // no dat.conf could be read
    bool config_transient = false;   // the last read failed for want of descriptors or memory
    std::string libdat2_dir;
    std::vector<std::unique_ptr<StaticEntry>> statics; // fixed after config load
    std::vector<std::unique_ptr<DynamicEntry>> dynamics;
    std::vector<IaSlot> ias = std::vector<IaSlot>(1); // slot 0 is DAT_HANDLE_NULL
    // Where the search for a free slot starts: slots are handed out in turn,
    // so that a closed IA's handle names no other IA until every other
    // handle has been used (a second dat_ia_close of it must not close the
    // IA opened after it).
    std::size_t next_ia_slot = 1;
};

State &state() {
    // Never destroyed: consumers may close IAs from atexit handlers or from
    // destructors of their own statics.
    static State *s = new State;
    return *s;
}

// A child of fork() may open IAs of its own (docs/fork.md): a lock another
// thread of the parent held at the fork would be held in the child for
// ever. Both are taken across the fork, in their order. Registered when
// libdat2 loads: a handler registered on first use could come while a fork
// is under way, after its prepare handlers ran.
[[maybe_unused]] const int fork_handlers = pthread_atfork(
    [] {
        state().load_mu.lock();
        state().table_mu.lock();
    },
    [] {
        state().table_mu.unlock();
        state().load_mu.unlock();
    },
    [] {
        // Made anew, not unlocked: a recursive mutex's owner is a thread
        // id, and the child's only thread has another one.
        new (&state().table_mu) std::mutex;
        new (&state().load_mu) std::recursive_mutex;
    });

void remember_provider(const DAT_PROVIDER *p) // called with table_mu held
{
    std::size_t n = g_known_count.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i)
        if (g_known[i].load(std::memory_order_relaxed) == p)
            return;
    if (n == kMaxKnownProviders)
        return; // beyond this, such handles are trusted as OFED trusts all
    g_known[n].store(p, std::memory_order_relaxed);
    g_known_count.store(n + 1, std::memory_order_release);
}

// Whether `table`'s DTO post slots and dat_evd_dequeue are code of the
// object that defines `marker` (a library's kGuardsDtoSlots): its promise
// covers them. A table another provider registered under the same name
// meanwhile, or a marker found in a library's dependency, is not trusted.
bool dto_slots_guarded_by(const DAT_PROVIDER *table, const void *marker) {
    Dl_info where;
    if (!marker || !dladdr(marker, &where))
        return false;
    const void *slots[] = {reinterpret_cast<const void *>(table->ep_post_send_func),
                           reinterpret_cast<const void *>(table->ep_post_recv_func),
                           reinterpret_cast<const void *>(table->ep_post_rdma_read_func),
                           reinterpret_cast<const void *>(table->ep_post_rdma_write_func),
                           reinterpret_cast<const void *>(table->evd_dequeue_func)};
    for (const void *slot : slots) {
        Dl_info info;
        if (!slot || !dladdr(slot, &info) || info.dli_fbase != where.dli_fbase)
            return false;
    }
    return true;
}

bool name_fits(const char *name) {
    return name && std::memchr(name, '\0', DAT_NAME_MAX_LENGTH) != nullptr && name[0] != '\0';
}

void ensure_config(State &s) // load_mu held
{
    if (s.config_loaded)
        return;
    s.libdat2_dir = object_directory(reinterpret_cast<const void *>(&ensure_config));
    DAT2_LOG(log::kStaticRegistry, "static registry: libdat2 %s (dat2) in %s", DAT2_VERSION, s.libdat2_dir.c_str());
    StaticConfig cfg = read_static_config(s.libdat2_dir);
    // A file the process could not open for want of descriptors or memory
    // is read again at the next call: the entries are taken only from a
    // read that saw every file as it is (the table is fixed once taken).
    s.config_transient = std::any_of(cfg.files.begin(), cfg.files.end(), [](const auto &f) { return f.transient; });
    if (s.config_transient) {
        s.no_static_registry = true;
        return;
    }
    s.config_loaded = true;
    s.no_static_registry = std::none_of(cfg.files.begin(), cfg.files.end(), [](const auto &f) { return f.read; });
    for (auto &e : cfg.entries) {
        auto se = std::make_unique<StaticEntry>();
        se->info = provider_info_of(e);
        se->conf = std::move(e);
        s.statics.push_back(std::move(se));
    }
}

DynamicEntry *find_dynamic(State &s, const char *name) // table_mu held
{
    for (auto &d : s.dynamics)
        if (std::strncmp(d->info.ia_name, name, DAT_NAME_MAX_LENGTH) == 0)
            return d.get();
    return nullptr;
}

// Whether a provider registered with `have` can serve an open that asks for
// (major, minor, thread_safe). A thread-safe provider serves a non-thread-safe
// consumer too; OFED required an exact match.
// `dat12`: the request comes from libdat.so.1 (dat12_ia_openv), which adapts
// the DAT 2.0 provider interface to DAT 1.x programs. Every provider this
// registry loads implements that interface, whatever API its dat.conf entry
// names, so such a request takes u2.0 entries as well as u1.x ones.
DAT_RETURN_SUBTYPE mismatch(const DAT_PROVIDER_INFO &have, DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safe,
                            bool dat12, std::string &why) {
    if (dat12 && major == 1 && have.dapl_version_major == 2)
        minor = 0;
    else if (have.dapl_version_major != major) {
        why = "it implements DAT API " + std::to_string(have.dapl_version_major) + "." +
              std::to_string(have.dapl_version_minor) + ", the application asks for " + std::to_string(major) + "." +
              std::to_string(minor);
        return DAT_MAJOR_NOT_FOUND;
    }
    if (have.dapl_version_minor < minor) {
        why = "it implements DAT API " + std::to_string(have.dapl_version_major) + "." +
              std::to_string(have.dapl_version_minor) + ", older than the " + std::to_string(major) + "." +
              std::to_string(minor) + " the application asks for";
        return DAT_MINOR_NOT_FOUND;
    }
    if (thread_safe && !have.is_thread_safe) {
        why = "it is nonthreadsafe and the application asks for a thread-safe provider "
              "(mark the entry threadsafe if the provider is, or build the application "
              "with DAT_THREADSAFE=DAT_FALSE)";
        return DAT_THREAD_SAFETY_NOT_FOUND;
    }
    return static_cast<DAT_RETURN_SUBTYPE>(0);
}

// Calls into provider code, which may be C++ and throw: the registry's
// state must survive that, so each call site learns of it as a failure.
template <class F> bool provider_call(const char *what, const char *name, F &&f) noexcept {
    try {
        f();
        return true;
    } catch (const std::exception &e) {
        DAT2_ERR("%s for '%s' threw: %s", what, name, e.what());
    } catch (...) {
        DAT2_ERR("%s for '%s' threw", what, name);
    }
    return false;
}

// Finalizes an entry nobody holds any more. load_mu held, table_mu not.
void finalize(State &s, StaticEntry &e) {
    if (!e.initialized)
        return;
    e.initialized = false;
    DAT2_LOG(log::kStaticRegistry, "static registry: dat_provider_fini for %s (%s)", e.conf.ia_name.c_str(),
             e.library->path.c_str());
    provider_call("dat_provider_fini", e.conf.ia_name.c_str(), [&] { e.library->fini(&e.info); });
    // A provider that did not remove itself must not stay registered.
    std::lock_guard<std::mutex> table(s.table_mu);
    for (auto it = s.dynamics.begin(); it != s.dynamics.end();) {
        if ((*it)->owner == &e && (*it)->open_ias == 0) {
            DAT2_LOG(log::kDynamicRegistry, "dynamic registry: %s did not remove itself in dat_provider_fini; removed",
                     (*it)->info.ia_name);
            it = s.dynamics.erase(it);
        } else {
            ++it;
        }
    }
}

// Drops one reference taken by take_reference. Returns the entry to
// finalize (call finalize() with load_mu held) or nullptr. table_mu held.
StaticEntry *drop_reference(DynamicEntry *d) {
    --d->open_ias;
    if (StaticEntry *owner = d->owner)
        if (--owner->open_ias == 0)
            return owner;
    return nullptr;
}

void take_reference(DynamicEntry *d) // table_mu held
{
    ++d->open_ias;
    if (d->owner)
        ++d->owner->open_ias;
}

// Releases a reference from outside any lock, finalizing if it was the last.
void release(State &s, DynamicEntry *d) {
    std::lock_guard<std::recursive_mutex> load(s.load_mu);
    StaticEntry *idle;
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        idle = drop_reference(d);
        if (idle && idle->open_ias != 0)
            idle = nullptr;
    }
    if (idle)
        finalize(s, *idle);
}

// Finds the provider serving `name`, loading and initializing the first
// usable dat.conf entry if nobody registered that name yet, and takes a
// reference on it. load_mu held. Returns nullptr with `code` set.
DynamicEntry *acquire_provider(State &s, const char *name, DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safe,
                               bool dat12, DAT_RETURN &code) {
    ensure_config(s);
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        if (DynamicEntry *d = find_dynamic(s, name)) {
            std::string why;
            if (DAT_RETURN_SUBTYPE sub = mismatch(d->info, major, minor, thread_safe, dat12, why)) {
                DAT2_ERR("dat_ia_open('%s'): the registered provider does not match: %s", name, why.c_str());
                code = DAT_ERROR(DAT_PROVIDER_NOT_FOUND, sub);
                return nullptr;
            }
            take_reference(d);
            return d;
        }
    }
    std::vector<std::string> reasons;
    DAT_RETURN_SUBTYPE subtype = DAT_NAME_NOT_REGISTERED;
    bool any = false, out_of_fds = false;
    for (auto &ep : s.statics) {
        StaticEntry &e = *ep;
        if (e.conf.ia_name != name)
            continue;
        any = true;
        std::string where = e.conf.file + ":" + std::to_string(e.conf.line);
        if (!e.conf.loadable()) {
            reasons.push_back(
                where + ": entry is " +
                (e.conf.api_kind != 'u' ? "for kernel consumers ('k' API version)" : "marked nondefault (disabled)"));
            continue;
        }
        std::string why;
        if (DAT_RETURN_SUBTYPE sub = mismatch(e.info, major, minor, thread_safe, dat12, why)) {
            reasons.push_back(where + ": " + why);
            subtype = sub;
            continue;
        }
        if (!e.library) {
            e.library = load_provider_library(e.conf.library, s.libdat2_dir, why);
            if (!e.library) {
                reasons.push_back(where + ": " + why);
                subtype = DAT_NAME_NOT_REGISTERED;
                // A process out of file descriptors: dat_ia_open(3DAT)'s
                // "resource limitations", not a missing provider.
                out_of_fds = out_of_fds || out_of_descriptors();
                continue;
            }
        }
        bool init_ok = true;
        if (!e.initialized) {
            DAT2_LOG(log::kStaticRegistry, "static registry: dat_provider_init for %s from %s", name,
                     e.library->path.c_str());
            e.initialized = true;
            init_ok =
                provider_call("dat_provider_init", name, [&] { e.library->init(&e.info, e.conf.ia_params.c_str()); });
        }
        {
            std::lock_guard<std::mutex> table(s.table_mu);
            DynamicEntry *d = find_dynamic(s, name);
            if (d && init_ok) {
                // Ownership by name, whichever thread the provider registered from.
                if (!d->owner)
                    d->owner = &e;
                if (dto_slots_guarded_by(d->provider, e.library->guards_dto_slots)) {
                    const DAT_PROVIDER *none = nullptr;
                    g_guarded_first.compare_exchange_strong(none, d->provider, std::memory_order_release);
                }
                take_reference(d);
                return d;
            }
        }
        reasons.push_back(where + ": " + e.library->path +
                          (init_ok ? ": dat_provider_init did not register a provider named '" + std::string(name) +
                                         "' (the provider rejected its ia_params \"" + e.conf.ia_params +
                                         "\" or found no device; its own log may say more)"
                                   : ": dat_provider_init failed"));
        subtype = DAT_NAME_NOT_REGISTERED;
        if (e.open_ias == 0)
            finalize(s, e);
    }
    if (!any) {
        std::string known;
        std::vector<std::string> names;
        for (auto &e : s.statics)
            if (e->conf.loadable() && known.find(" " + e->conf.ia_name + ",") == std::string::npos) {
                known += " " + e->conf.ia_name + ",";
                names.push_back(e->conf.ia_name);
            }
        {
            std::lock_guard<std::mutex> table(s.table_mu);
            for (auto &d : s.dynamics)
                names.push_back(d->info.ia_name);
        }
        if (!known.empty())
            known.pop_back();
        const std::string guess = closest_name(name, names);
        DAT2_ERR("dat_ia_open('%s'): no such provider: not in dat.conf and not registered "
                 "(known:%s)%s",
                 name, known.empty() ? " none" : known.c_str(),
                 guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str());
    } else {
        for (auto &r : reasons)
            DAT2_ERR("dat_ia_open('%s'): %s", name, r.c_str());
    }
    code = out_of_fds || s.config_transient ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, 0)
                                            : DAT_ERROR(DAT_PROVIDER_NOT_FOUND, subtype);
    return nullptr;
}

const char *strip_ro_aware(const char *name) {
    // dat_ia_open(3DAT): the RO_AWARE_ prefix is removed before the lookup.
    static const char kRoAware[] = "RO_AWARE_";
    if (std::strncmp(name, kRoAware, sizeof kRoAware - 1) == 0 && name[sizeof kRoAware - 1])
        return name + sizeof kRoAware - 1;
    return name;
}

} // namespace

bool known_provider_scan(const DAT_PROVIDER *p) noexcept {
    std::size_t n = g_known_count.load(std::memory_order_acquire);
    for (std::size_t i = 1; i < n; ++i)
        if (g_known[i].load(std::memory_order_relaxed) == p)
            return true;
    return n == kMaxKnownProviders;
}

DAT_RETURN add_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info) {
    if (!provider)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!info || !name_fits(info->ia_name))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!provider->ia_open_func || !provider->ia_close_func) {
        DAT2_ERR("dat_registry_add_provider('%s'): provider table has no ia_open or ia_close", info->ia_name);
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    State &s = state();
    std::lock_guard<std::mutex> table(s.table_mu);
    if (find_dynamic(s, info->ia_name)) {
        DAT2_LOG(log::kDynamicRegistry, "dynamic registry: '%s' is already registered", info->ia_name);
        return DAT_PROVIDER_ALREADY_REGISTERED;
    }
    auto d = std::make_unique<DynamicEntry>();
    d->provider = provider;
    d->info = *info;
    s.dynamics.push_back(std::move(d));
    remember_provider(provider);
    DAT2_LOG(log::kDynamicRegistry, "dynamic registry: added '%s' (API %u.%u, %s)", info->ia_name,
             info->dapl_version_major, info->dapl_version_minor, info->is_thread_safe ? "threadsafe" : "nonthreadsafe");
    return DAT_SUCCESS;
}

DAT_RETURN remove_provider(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info) {
    if (!provider)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!info || !name_fits(info->ia_name))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    State &s = state();
    std::lock_guard<std::mutex> table(s.table_mu);
    auto it = std::find_if(s.dynamics.begin(), s.dynamics.end(), [&](const auto &d) {
        return std::strncmp(d->info.ia_name, info->ia_name, DAT_NAME_MAX_LENGTH) == 0 && d->provider == provider;
    });
    if (it == s.dynamics.end())
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if ((*it)->open_ias > 0)
        return DAT_PROVIDER_IN_USE;
    s.dynamics.erase(it);
    DAT2_LOG(log::kDynamicRegistry, "dynamic registry: removed '%s'", info->ia_name);
    return DAT_SUCCESS;
}

DAT_RETURN list_providers(DAT_COUNT max_to_return, DAT_COUNT *entries_returned,
                          DAT_PROVIDER_INFO *(dat_provider_list[])) {
    if (!entries_returned)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    State &s = state();
    std::lock_guard<std::recursive_mutex> load(s.load_mu);
    ensure_config(s);
    std::lock_guard<std::mutex> table(s.table_mu);
    // dat_registry_list_providers(3DAT): DAT_INTERNAL_ERROR, "The DAT static
    // registry is missing" (ensure_config said why); providers that
    // registered themselves are still listed.
    if (s.no_static_registry && s.dynamics.empty()) {
        *entries_returned = 0;
        return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    }
    // Every loadable dat.conf entry (a fail-over chain once), then providers
    // that registered themselves without a dat.conf entry.
    std::vector<const DAT_PROVIDER_INFO *> infos;
    auto listed = [&](const char *name) {
        return std::any_of(infos.begin(), infos.end(), [&](const DAT_PROVIDER_INFO *i) {
            return std::strncmp(i->ia_name, name, DAT_NAME_MAX_LENGTH) == 0;
        });
    };
    for (auto &e : s.statics)
        if (e->conf.loadable() && !listed(e->info.ia_name))
            infos.push_back(&e->info);
    for (auto &d : s.dynamics)
        if (!listed(d->info.ia_name))
            infos.push_back(&d->info);
    const auto count = static_cast<DAT_COUNT>(infos.size());
    // A count query (no room): the count, with DAT_INVALID_PARAMETER.
    if (max_to_return <= 0) {
        *entries_returned = count;
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    if (!dat_provider_list)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    // A list shorter than the registry gets its first entries, with
    // DAT_SUCCESS, as from OFED's libdat2, which real consumers are written
    // against: Open MPI 1.6.5 lists into room for its maximum number of
    // BTLs (8) and turns its udapl BTL off on any error, and a host with
    // OFED's stock /etc/dat.conf besides ours has dozens of entries.
    // dat_registry_list_providers(3DAT) would fail the call instead.
    const DAT_COUNT n = std::min(count, max_to_return);
    for (DAT_COUNT i = 0; i < n; ++i)
        if (!dat_provider_list[i])
            return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    for (DAT_COUNT i = 0; i < n; ++i)
        *dat_provider_list[i] = *infos[static_cast<std::size_t>(i)];
    if (n < count)
        DAT2_LOG(log::kStaticRegistry, "dat_registry_list_providers: room for %d of %d entries; the first %d returned",
                 static_cast<int>(max_to_return), static_cast<int>(count), static_cast<int>(n));
    *entries_returned = n;
    return DAT_SUCCESS;
}

DAT_RETURN providers_related(const char *name1, const char *name2, DAT_HA_RELATIONSHIP *answer) {
    if (!name_fits(name1))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (!name_fits(name2))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!answer)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    State &s = state();
    std::lock_guard<std::recursive_mutex> load(s.load_mu);
    ensure_config(s);
    std::lock_guard<std::mutex> table(s.table_mu);
    auto library_of = [&](const char *name) -> const std::string * {
        for (auto &e : s.statics)
            if (e->conf.loadable() && e->conf.ia_name == name)
                return &e->conf.library;
        return nullptr;
    };
    const std::string *l1 = library_of(name1);
    const std::string *l2 = library_of(name2);
    bool known1 = l1 || find_dynamic(s, name1);
    bool known2 = l2 || find_dynamic(s, name2);
    if (!known1 || !known2)
        return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    // The registry only knows names and libraries: the same name is the same
    // IA; different provider libraries cannot fail over to each other; for
    // the rest only an open IA (its ia_ha_related) can tell.
    if (std::strncmp(name1, name2, DAT_NAME_MAX_LENGTH) == 0)
        *answer = DAT_HA_TRUE;
    else if (l1 && l2 && *l1 != *l2)
        *answer = DAT_HA_FALSE;
    else
        *answer = DAT_HA_UNKNOWN;
    return DAT_SUCCESS;
}

DAT_RETURN ia_open(const char *name, DAT_COUNT async_evd_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle,
                   DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN thread_safety, bool dat12) {
    if (!name_fits(name)) {
        DAT2_ERR("dat_ia_open: the IA name is %s", !name ? "NULL"
                                                   : name[0] == '\0'
                                                       ? "empty"
                                                       : "not terminated within DAT_NAME_MAX_LENGTH (256) bytes");
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    if (async_evd_qlen < 0)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!async_evd)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!ia_handle)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    name = strip_ro_aware(name);

    State &s = state();
    DynamicEntry *provider = nullptr;
    std::size_t slot = kMaxIaHandles; // none yet
    {
        std::lock_guard<std::recursive_mutex> load(s.load_mu);
        DAT_RETURN code = DAT_SUCCESS;
        provider = acquire_provider(s, name, major, minor, thread_safety, dat12, code);
        if (!provider)
            return code;
        // A handle for the IA, taken before the provider opens it so that
        // running out of handles never has to undo a provider open.
        std::lock_guard<std::mutex> table(s.table_mu);
        for (std::size_t n = 0; n < kMaxIaHandles - 1; ++n) {
            // From next_ia_slot (never past the table's end) round to slot 1.
            const std::size_t candidate = 1 + (s.next_ia_slot - 1 + n) % (kMaxIaHandles - 1);
            if (candidate == s.ias.size())
                s.ias.emplace_back();
            if (s.ias[candidate].free()) {
                slot = candidate;
                s.ias[slot].reserved = true;
                s.next_ia_slot = slot + 1 < kMaxIaHandles ? slot + 1 : 1;
                break;
            }
        }
    }
    if (slot >= kMaxIaHandles) {
        DAT2_ERR("dat_ia_open('%s'): %zu IAs are open, the most libdat2 hands out", name, kMaxIaHandles - 1);
        release(s, provider);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }

    // The provider opens the IA with no registry lock held.
    DAT_IA_HANDLE provider_ia = nullptr;
    DAT_RETURN ret = DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    provider_call("ia_open", name, [&] {
        ret = provider->provider->ia_open_func(provider->info.ia_name, async_evd_qlen, async_evd, &provider_ia);
    });
    if (ret == DAT_SUCCESS && provider_ia) {
        std::lock_guard<std::mutex> table(s.table_mu);
        s.ias[slot] = IaSlot{provider_ia, provider, false, false};
        DAT2_LOG(log::kConsumerApi, "dat_ia_open('%s') = IA %zu (provider %p)", name, slot,
                 static_cast<void *>(provider_ia));
        *ia_handle = reinterpret_cast<DAT_IA_HANDLE>(static_cast<std::uintptr_t>(slot));
        return DAT_SUCCESS;
    }
    if (ret == DAT_SUCCESS)
        ret = DAT_ERROR(DAT_INTERNAL_ERROR, 0); // "success" without an IA
    const char *major_msg = "", *minor_msg = "";
    dat_strerror(ret, &major_msg, &minor_msg);
    DAT2_ERR("dat_ia_open('%s'): the provider failed to open the IA: %s%s%s", name, major_msg, *minor_msg ? " " : "",
             minor_msg);
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        s.ias[slot] = IaSlot{};
    }
    release(s, provider);
    return ret;
}

DAT_RETURN ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags) {
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG)
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    State &s = state();
    const auto slot = reinterpret_cast<std::uintptr_t>(ia_handle);
    DAT_IA_HANDLE provider_ia;
    DynamicEntry *provider;
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        if (slot == 0 || slot >= s.ias.size() || !s.ias[slot].provider_ia || s.ias[slot].closing)
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
        s.ias[slot].closing = true; // a second concurrent close sees an invalid handle
        provider_ia = s.ias[slot].provider_ia;
        provider = s.ias[slot].provider;
    }
    DAT_RETURN ret = DAT_ERROR(DAT_INTERNAL_ERROR, 0);
    provider_call("ia_close", provider->info.ia_name,
                  [&] { ret = provider->provider->ia_close_func(provider_ia, flags); });
    if (ret != DAT_SUCCESS) {
        std::lock_guard<std::mutex> table(s.table_mu);
        s.ias[slot].closing = false;
        return ret;
    }
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        s.ias[slot] = IaSlot{};
    }
    DAT2_LOG(log::kConsumerApi, "dat_ia_close(IA %zu)", static_cast<std::size_t>(slot));
    release(s, provider);
    return DAT_SUCCESS;
}

DAT_RETURN extension_open(const char *name, DAT_EXTENDED_OP op, va_list args) {
    if (!name_fits(name))
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    name = strip_ro_aware(name);
    State &s = state();
    DynamicEntry *provider = nullptr;
    {
        std::lock_guard<std::recursive_mutex> load(s.load_mu);
        DAT_RETURN code = DAT_SUCCESS;
        provider = acquire_provider(s, name, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE, false, code);
        if (!provider)
            return code;
    }
    DAT_RETURN ret = DAT_NOT_IMPLEMENTED;
    if (auto f = provider->provider->handle_extendedop_func) {
        // As OFED does: the provider gets the name where a handle would be,
        // and the arguments that follow it.
        provider_call("extension open", name,
                      [&] { ret = f(reinterpret_cast<DAT_HANDLE>(const_cast<char *>(name)), op, args); });
    }
    if (ret != DAT_SUCCESS) {
        release(s, provider);
    } else {
        // The reference stays until a DAT_CLOSE_EXTENSION_BASE op.
        std::lock_guard<std::mutex> table(s.table_mu);
        ++provider->extension_refs;
    }
    return ret;
}

DAT_RETURN extension_close(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args) {
    const DAT_PROVIDER *table_ptr; // bytewise: the handle need not be aligned
    std::memcpy(&table_ptr, handle, sizeof table_ptr);
    State &s = state();
    DynamicEntry *provider = nullptr;
    {
        std::lock_guard<std::mutex> table(s.table_mu);
        // Only a reference an open op took can be given back: a close op
        // without one must not drop a reference that an IA holds.
        for (auto &d : s.dynamics)
            if (d->provider == table_ptr && d->extension_refs > 0)
                provider = d.get();
        if (provider)
            --provider->extension_refs; // claimed; restored if the provider refuses
    }
    if (!provider)
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
    DAT_RETURN ret = DAT_NOT_IMPLEMENTED;
    if (auto f = table_ptr->handle_extendedop_func)
        provider_call("extension close", provider->info.ia_name, [&] { ret = f(handle, op, args); });
    if (ret == DAT_SUCCESS) {
        release(s, provider);
    } else {
        std::lock_guard<std::mutex> table(s.table_mu);
        ++provider->extension_refs;
    }
    return ret;
}

DAT_RETURN translate_ia(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out) {
    State &s = state();
    std::lock_guard<std::mutex> table(s.table_mu);
    const auto value = reinterpret_cast<std::uintptr_t>(handle);
    if (value != 0 && value < s.ias.size()) {
        const IaSlot &slot = s.ias[value];
        if (slot.provider_ia && !slot.closing) {
            *out = slot.provider_ia;
            return DAT_SUCCESS;
        }
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    }
    if (value >= kMaxIaHandles) {
        // A provider asks for the consumer's handle of its IA. Prefer a live
        // slot: a closing one may share the address of a freshly opened IA.
        std::size_t closing = 0;
        for (std::size_t i = 1; i < s.ias.size(); ++i) {
            if (s.ias[i].provider_ia != handle)
                continue;
            if (!s.ias[i].closing) {
                *out = reinterpret_cast<DAT_IA_HANDLE>(static_cast<std::uintptr_t>(i));
                return DAT_SUCCESS;
            }
            closing = i;
        }
        if (closing) {
            *out = reinterpret_cast<DAT_IA_HANDLE>(static_cast<std::uintptr_t>(closing));
            return DAT_SUCCESS;
        }
    }
    return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
}

} // namespace dat2::registry
