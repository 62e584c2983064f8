// The C++ objects behind the NDK handles. Each starts with the C struct the consumer sees (DESIGN §3), so a
// handle is cast back with no lookup; the type and a magic number are checked first.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include <softndk/softndk.h>

#include "api/lifetime.h"
#include "engine/completion_executor.h"
#include "engine/fault_injector.h"
#include "mem/logical_address_space.h"
#include "mem/memory_region.h"
#include "mem/token_table.h"

namespace softndk::api {

struct AdapterObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeAdapter;
    static constexpr uint32_t kMagic = 0x41445054;  // "ADPT"
    NDK_ADAPTER ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    NDK_ADAPTER_INFO info{};
    mem::RegistrationLimits limits{};
    std::vector<SOCKADDR_INET> local_addresses;
    engine::FaultInjector faults;
    std::unique_ptr<engine::CompletionExecutor> executor;
    mem::TokenTable tokens;
    mem::LogicalAddressSpace logical;
    std::mutex closed_mutex;
    std::condition_variable closed_cv;
    bool released = false;

    AdapterObject(uint64_t seed, const Lifetime::Ops& ops) : lifetime(ops, this, nullptr), tokens(seed) {}
};

struct PdObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypePd;
    static constexpr uint32_t kMagic = 0x50444F42;  // "PDOB"
    NDK_PD ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    AdapterObject* adapter;
    uint32_t privileged_slot = 0;
    mem::TokenPair privileged_tokens{};
    mem::TokenTarget privileged_target{};

    PdObject(AdapterObject* owner, const Lifetime::Ops& ops) : lifetime(ops, this, &owner->lifetime), adapter(owner) {}
};

struct MrObject {
    static constexpr NDK_OBJECT_TYPE kType = NdkObjectTypeMr;
    static constexpr uint32_t kMagic = 0x4D524F42;  // "MROB"
    NDK_MR ndk{};
    uint32_t magic = kMagic;
    Lifetime lifetime;
    PdObject* pd;
    mem::MemoryRegion region;

    MrObject(PdObject* owner, bool fast, const Lifetime::Ops& ops)
        : lifetime(ops, this, &owner->lifetime), pd(owner), region(owner->adapter->tokens, fast, owner) {}
};

// Returns the object behind a handle, or nullptr for NULL, a wrong type or a closed/foreign object.
template <class Object, class Handle>
Object* FromHandle(Handle* handle) {
    if (handle == nullptr) return nullptr;
    auto* header = reinterpret_cast<NDK_OBJECT_HEADER*>(handle);
    if (header->ObjectType != Object::kType) return nullptr;
    auto* object = reinterpret_cast<Object*>(handle);
    return object->magic == Object::kMagic ? object : nullptr;
}

// LIFE-03/04: the header the consumer sees.
template <class Handle, class Dispatch>
void InitializeHandle(Handle& handle, NDK_OBJECT_TYPE type, NDK_VERSION version, const Dispatch* dispatch) {
    handle.Header.Version = version;
    handle.Header.ObjectType = type;
    handle.Header.NdkReserved = NDK_OBJECT_HEADER_RESERVED_BLOCK{};
    handle.Dispatch = dispatch;
}

// Shared by every dispatch table (AI-11): no extension interfaces exist.
NTSTATUS QueryExtensionInterface(NDK_OBJECT_HEADER* object, GUID* id, NDK_VERSION version,
                                 NDK_EXTENSION_INTERFACE* out);

extern const NDK_ADAPTER_DISPATCH kAdapterDispatch;
extern const NDK_PD_DISPATCH kPdDispatch;
extern const NDK_MR_DISPATCH kMrDispatch;

}  // namespace softndk::api
