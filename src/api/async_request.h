// The one place that decides how an asynchronous NDK call completes (CB-01 … CB-04, LIFE-01/02):
// injected inline failure, injected asynchronous failure, inline completion, or pended completion on the
// adapter's executor. Every create and request function goes through these two helpers.
#pragma once

#include <functional>
#include <utility>

#include "api/objects.h"
#include "common/last_error.h"

namespace softndk::api {

using Finish = std::function<void(NTSTATUS)>;

// Bad input: says why (SoftNdkGetLastErrorText) and returns STATUS_INVALID_PARAMETER.
inline NTSTATUS InvalidParameter(const char* why) {
    SetLastErrorText("%s", why);
    return STATUS_INVALID_PARAMETER;
}

// Issue 19 §2: objects of two devices cannot be combined; the refusal names both, by what they own.
inline NTSTATUS ForeignAdapters(const char* call, const char* what, const AdapterObject& theirs, const char* other,
                                const AdapterObject& ours) {
    SetLastErrorText(
        "%s: the %s belongs to adapter %p (%s), the %s to adapter %p (%s): objects of two devices (two interfaces, "
        "or two SoftNdkOpenAdapter calls) cannot be combined; create them through opens of one interface",
        call, what, static_cast<const void*>(&theirs), DescribeOwnedAddresses(theirs).c_str(), other,
        static_cast<const void*>(&ours), DescribeOwnedAddresses(ours).c_str());
    return STATUS_INVALID_PARAMETER;
}

// `work(finish)` does the request and returns its status; it may return STATUS_PENDING itself, and then
// must call `finish(status)` exactly once later. `object` is kept alive until the request completes. `undo()`
// runs exactly once if the request fails, inline or asynchronously (injected failures included), before the
// completion: it gives back what the caller took for the request, so the consumer may try again.
template <class Work, class Undo>
NTSTATUS RunRequest(AdapterObject& adapter, engine::ProviderFunction function, Lifetime& object,
                    NDK_FN_REQUEST_COMPLETION completion, PVOID context, Work work, Undo undo) {
    const engine::FaultDecision fault = adapter.faults.Check(function);
    if (fault.kind == engine::FaultDecision::Kind::kFailInline) {
        VerifierRequestFinished(&object);
        SetLastErrorText("injected failure 0x%08X", static_cast<unsigned>(fault.status));
        undo();
        return fault.status;
    }
    object.AddRef();
    Lifetime* held = &object;
    Finish finish = [completion, context, held, undo, function](NTSTATUS status) mutable {
        const char* name = engine::kProviderFunctions[static_cast<size_t>(function)].name;
        if (!NT_SUCCESS(status)) {
            undo();
            VerifierRequestFailed(name, status);
        }
        VerifierRequestFinished(held);
        {
            CallbackScope scope(name, context);
            completion(context, status);
        }
        held->Release();
    };
    if (fault.kind == engine::FaultDecision::Kind::kFailAsync) {
        adapter.executor->Post([finish, status = fault.status] { finish(status); });
        return STATUS_PENDING;
    }
    if (!adapter.executor->ShouldPend()) {
        NTSTATUS status = work(finish);
        if (status != STATUS_PENDING) {  // completed inline: no callback (CB-01)
            if (!NT_SUCCESS(status)) undo();
            VerifierRequestFinished(held);
            held->Release();
        }
        return status;
    }
    adapter.executor->Post([work = std::move(work), finish]() mutable {
        NTSTATUS status = work(finish);
        if (status != STATUS_PENDING) finish(status);
    });
    return STATUS_PENDING;
}

template <class Work>
NTSTATUS RunRequest(AdapterObject& adapter, engine::ProviderFunction function, Lifetime& object,
                    NDK_FN_REQUEST_COMPLETION completion, PVOID context, Work work) {
    return RunRequest(adapter, function, object, completion, context, std::move(work), [] {});
}

// `make(&header)` creates the object. Inline success stores it through `out`; after STATUS_PENDING the
// object goes only to the completion and `out` is never touched (LIFE-02). `parent` stays alive meanwhile.
template <class Handle, class Make>
NTSTATUS RunCreate(AdapterObject& adapter, engine::ProviderFunction function, Lifetime& parent,
                   NDK_FN_CREATE_COMPLETION completion, PVOID context, Handle** out, Make make) {
    const engine::FaultDecision fault = adapter.faults.Check(function);
    if (fault.kind == engine::FaultDecision::Kind::kFailInline) {
        SetLastErrorText("injected failure 0x%08X", static_cast<unsigned>(fault.status));
        return fault.status;
    }
    if (fault.kind == engine::FaultDecision::Kind::kFailAsync || adapter.executor->ShouldPend()) {
        parent.AddRef();
        Lifetime* held = &parent;
        adapter.executor->Post([fault, completion, context, held, function, make = std::move(make)]() mutable {
            NDK_OBJECT_HEADER* header = nullptr;
            NTSTATUS status = fault.kind == engine::FaultDecision::Kind::kFailAsync ? fault.status : make(&header);
            const char* name = engine::kProviderFunctions[static_cast<size_t>(function)].name;
            if (!NT_SUCCESS(status)) VerifierRequestFailed(name, status);
            {
                CallbackScope scope(name, context);
                completion(context, status, NT_SUCCESS(status) ? header : nullptr);
            }
            held->Release();
        });
        return STATUS_PENDING;
    }
    NDK_OBJECT_HEADER* header = nullptr;
    NTSTATUS status = make(&header);
    if (NT_SUCCESS(status)) *out = reinterpret_cast<Handle*>(header);
    return status;
}

// Close (LIFE-05): in pend mode the close also pends, so consumers exercise their close-completion path.
inline NTSTATUS RunClose(AdapterObject& adapter, Lifetime& object, NDK_FN_CLOSE_COMPLETION completion, PVOID context) {
    if (!VerifierCloseStarted(object.object())) return InvalidParameter("NdkCloseObject: closed twice (LIFE-05)");
    if (!adapter.executor->ShouldPend()) return object.Close(completion, context);
    object.AddRef();
    Lifetime* held = &object;
    object.Close(completion, context);  // cannot finish: we hold a reference
    adapter.executor->Post([held] { held->Release(); });
    return STATUS_PENDING;
}

}  // namespace softndk::api
