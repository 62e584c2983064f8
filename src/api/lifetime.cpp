// The registry of live objects behind a close that waits (issue 19 §3): "SoftNdkCloseAdapter still waiting"
// names each object, the call that made it and its state, instead of a count.
#include "api/lifetime.h"

#include <cstdio>
#include <mutex>
#include <unordered_set>

namespace softndk::api {
namespace {

struct LiveObjects {
    std::mutex mutex;
    std::unordered_set<Lifetime*> live;
};

LiveObjects& Live() {
    static auto* live = new LiveObjects();
    return *live;
}

const char* TypeAndCreator(NDK_OBJECT_TYPE type) {
    switch (type) {
        case NdkObjectTypeQp:
            return "QP (NdkCreateQp)";
        case NdkObjectTypeCq:
            return "CQ (NdkCreateCq)";
        case NdkObjectTypeMr:
            return "MR (NdkCreateMr)";
        case NdkObjectTypeMw:
            return "MW (NdkCreateMw)";
        case NdkObjectTypePd:
            return "PD (NdkCreatePd)";
        case NdkObjectTypeSharedEndpoint:
            return "shared endpoint (NdkCreateSharedEndpoint)";
        case NdkObjectTypeConnector:
            return "connector (NdkCreateConnector, or handed over by a listener's connect event)";
        case NdkObjectTypeListener:
            return "listener (NdkCreateListener)";
        case NdkObjectTypeSrq:
            return "SRQ (NdkCreateSrq)";
        default:
            return "object";
    }
}

const Lifetime* RootOf(const Lifetime* lifetime) {
    while (lifetime->parent() != nullptr) lifetime = lifetime->parent();
    return lifetime;
}

}  // namespace

void RegisterLive(Lifetime* lifetime) {
    LiveObjects& live = Live();
    std::lock_guard lock(live.mutex);
    live.live.insert(lifetime);
}

void UnregisterLive(Lifetime* lifetime) {
    LiveObjects& live = Live();
    std::lock_guard lock(live.mutex);
    live.live.erase(lifetime);
}

std::string DescribeLiveUnder(const Lifetime* root, size_t limit) {
    LiveObjects& live = Live();
    std::lock_guard lock(live.mutex);
    std::string text;
    size_t shown = 0, more = 0;
    for (const Lifetime* lifetime : live.live) {
        if (RootOf(lifetime) != root) continue;
        if (shown == limit) {
            ++more;
            continue;
        }
        const auto* header = static_cast<const NDK_OBJECT_HEADER*>(lifetime->object());
        const uint32_t references = lifetime->references();
        char line[320];
        if (lifetime->closing())
            std::snprintf(line, sizeof(line),
                          "  %s %p: closing, waiting for %u reference(s) (its children, pending requests or a "
                          "callback still running)\n",
                          TypeAndCreator(header->ObjectType), static_cast<const void*>(header), references);
        else
            std::snprintf(line, sizeof(line), "  %s %p: open, never closed (%u reference(s))\n",
                          TypeAndCreator(header->ObjectType), static_cast<const void*>(header), references);
        text += line;
        ++shown;
    }
    if (more != 0) text += "  … and " + std::to_string(more) + " more\n";
    return text;
}

}  // namespace softndk::api
