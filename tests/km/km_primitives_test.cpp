// The kernel layer's primitives (issue 9 §2), each against the WDK behaviour it stands for.
#include <ntddk.h>
#include <ntstrsafe.h>
#include <wskndk.h>
#include <softndk_km.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

LARGE_INTEGER RelativeMs(LONGLONG ms) {
    LARGE_INTEGER value;
    value.QuadPart = -ms * 10000;
    return value;
}

TEST(KmEvent, NotificationEventStaysSignalledAndWakesEveryWaiter) {
    KEVENT event;
    KeInitializeEvent(&event, NotificationEvent, FALSE);
    std::atomic<int> woken{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 3; ++i)
        waiters.emplace_back([&] {
            EXPECT_EQ(KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, nullptr), STATUS_SUCCESS);
            ++woken;
        });
    EXPECT_EQ(KeSetEvent(&event, IO_NO_INCREMENT, FALSE), 0);
    for (auto& t : waiters) t.join();
    EXPECT_EQ(woken, 3);
    EXPECT_EQ(KeReadStateEvent(&event), 1);
    EXPECT_EQ(KeResetEvent(&event), 1);
    EXPECT_EQ(KeReadStateEvent(&event), 0);
}

TEST(KmEvent, SynchronizationEventResetsWhenAWaitIsSatisfied) {
    KEVENT event;
    KeInitializeEvent(&event, SynchronizationEvent, TRUE);
    LARGE_INTEGER zero{};
    EXPECT_EQ(KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    EXPECT_EQ(KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
}

TEST(KmEvent, RelativeTimeoutReturnsStatusTimeout) {
    KEVENT event;
    KeInitializeEvent(&event, NotificationEvent, FALSE);
    LARGE_INTEGER timeout = RelativeMs(20);
    LARGE_INTEGER start = KeQueryPerformanceCounter(nullptr);
    EXPECT_EQ(KeWaitForSingleObject(&event, Executive, KernelMode, FALSE, &timeout), STATUS_TIMEOUT);
    LARGE_INTEGER frequency;
    LARGE_INTEGER end = KeQueryPerformanceCounter(&frequency);
    EXPECT_EQ(frequency.QuadPart, 10000000);
    EXPECT_GE((end.QuadPart - start.QuadPart) / 10000, 19);
}

TEST(KmEvent, WaitForMultipleObjectsAnyAndAll) {
    KEVENT a, b;
    KeInitializeEvent(&a, NotificationEvent, FALSE);
    KeInitializeEvent(&b, NotificationEvent, FALSE);
    PVOID objects[2] = {&a, &b};
    LARGE_INTEGER zero{};
    EXPECT_EQ(KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &zero, nullptr),
              STATUS_TIMEOUT);
    KeSetEvent(&b, IO_NO_INCREMENT, FALSE);
    EXPECT_EQ(KeWaitForMultipleObjects(2, objects, WaitAny, Executive, KernelMode, FALSE, &zero, nullptr),
              STATUS_WAIT_1);
    EXPECT_EQ(KeWaitForMultipleObjects(2, objects, WaitAll, Executive, KernelMode, FALSE, &zero, nullptr),
              STATUS_TIMEOUT);
    std::thread setter([&] { KeSetEvent(&a, IO_NO_INCREMENT, FALSE); });
    EXPECT_EQ(KeWaitForMultipleObjects(2, objects, WaitAll, Executive, KernelMode, FALSE, nullptr, nullptr),
              STATUS_WAIT_0);
    setter.join();
}

TEST(KmSemaphore, CountsDownAndUp) {
    KSEMAPHORE semaphore;
    KeInitializeSemaphore(&semaphore, 1, 2);
    LARGE_INTEGER zero{};
    EXPECT_EQ(KeWaitForSingleObject(&semaphore, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    EXPECT_EQ(KeWaitForSingleObject(&semaphore, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    EXPECT_EQ(KeReleaseSemaphore(&semaphore, SEMAPHORE_INCREMENT, 2, FALSE), 0);
    EXPECT_EQ(KeReadStateSemaphore(&semaphore), 2);
}

TEST(KmIrql, SpinLocksRaiseToDispatchAndRestore) {
    EXPECT_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    KSPIN_LOCK lock;
    KeInitializeSpinLock(&lock);
    KIRQL old;
    KeAcquireSpinLock(&lock, &old);
    EXPECT_EQ(old, PASSIVE_LEVEL);
    EXPECT_EQ(KeGetCurrentIrql(), DISPATCH_LEVEL);
    EXPECT_FALSE(KeTryToAcquireSpinLockAtDpcLevel(&lock) && false);
    KeReleaseSpinLock(&lock, old);
    EXPECT_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    KLOCK_QUEUE_HANDLE handle;
    KeAcquireInStackQueuedSpinLock(&lock, &handle);
    EXPECT_EQ(KeGetCurrentIrql(), DISPATCH_LEVEL);
    KeReleaseInStackQueuedSpinLock(&handle);
    EXPECT_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    KeRaiseIrql(DISPATCH_LEVEL, &old);
    KeAcquireSpinLockAtDpcLevel(&lock);
    KeReleaseSpinLockFromDpcLevel(&lock);
    KeLowerIrql(old);
    EXPECT_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

TEST(KmIrql, FastMutexRaisesToApcLevel) {
    FAST_MUTEX mutex;
    ExInitializeFastMutex(&mutex);
    ExAcquireFastMutex(&mutex);
    EXPECT_EQ(KeGetCurrentIrql(), APC_LEVEL);
    std::thread other([&] { EXPECT_FALSE(ExTryToAcquireFastMutex(&mutex)); });
    other.join();
    ExReleaseFastMutex(&mutex);
    EXPECT_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

TEST(KmSync, InterlockedAndRundown) {
    volatile LONG value = 0;
    EXPECT_EQ(InterlockedIncrement(&value), 1);
    EXPECT_EQ(InterlockedCompareExchange(&value, 5, 1), 1);
    EXPECT_EQ(InterlockedExchangeAdd(&value, 2), 5);
    EXPECT_EQ(value, 7);
    EX_RUNDOWN_REF rundown;
    ExInitializeRundownProtection(&rundown);
    ASSERT_TRUE(ExAcquireRundownProtection(&rundown));
    std::thread releaser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ExReleaseRundownProtection(&rundown);
    });
    ExWaitForRundownProtectionRelease(&rundown);
    releaser.join();
    EXPECT_FALSE(ExAcquireRundownProtection(&rundown));
}

TEST(KmLists, ListEntryAndSingleListHelpers) {
    struct Item {
        LIST_ENTRY link;
        int value;
    } items[3] = {{{}, 1}, {{}, 2}, {{}, 3}};
    LIST_ENTRY head;
    InitializeListHead(&head);
    EXPECT_TRUE(IsListEmpty(&head));
    InsertTailList(&head, &items[1].link);
    InsertHeadList(&head, &items[0].link);
    InsertTailList(&head, &items[2].link);
    EXPECT_EQ(CONTAINING_RECORD(RemoveHeadList(&head), Item, link)->value, 1);
    EXPECT_EQ(CONTAINING_RECORD(RemoveTailList(&head), Item, link)->value, 3);
    EXPECT_TRUE(RemoveEntryList(&items[1].link));
    EXPECT_TRUE(IsListEmpty(&head));
    SINGLE_LIST_ENTRY stack{nullptr}, a{}, b{};
    PushEntryList(&stack, &a);
    PushEntryList(&stack, &b);
    EXPECT_EQ(PopEntryList(&stack), &b);
    EXPECT_EQ(PopEntryList(&stack), &a);
    EXPECT_EQ(PopEntryList(&stack), nullptr);
}

struct WorkContext {
    KEVENT done;
    KIRQL irql;
    PDEVICE_OBJECT device;
};
VOID WorkRoutine(PDEVICE_OBJECT device, PVOID context) {
    auto* work = static_cast<WorkContext*>(context);
    work->irql = KeGetCurrentIrql();
    work->device = device;
    KeSetEvent(&work->done, IO_NO_INCREMENT, FALSE);
}

TEST(KmWorkItems, IoQueueWorkItemRunsAtPassiveOnAWorker) {
    DRIVER_OBJECT driver{};
    PDEVICE_OBJECT device = nullptr;
    ASSERT_EQ(IoCreateDevice(&driver, 16, nullptr, FILE_DEVICE_NETWORK, 0, FALSE, &device), STATUS_SUCCESS);
    PIO_WORKITEM item = IoAllocateWorkItem(device);
    ASSERT_NE(item, nullptr);
    WorkContext work{};
    KeInitializeEvent(&work.done, NotificationEvent, FALSE);
    work.irql = HIGH_LEVEL;
    KIRQL old;
    KeRaiseIrql(DISPATCH_LEVEL, &old);  // queueing is allowed at DISPATCH_LEVEL
    IoQueueWorkItem(item, WorkRoutine, DelayedWorkQueue, &work);
    KeLowerIrql(old);
    EXPECT_EQ(KeWaitForSingleObject(&work.done, Executive, KernelMode, FALSE, nullptr), STATUS_SUCCESS);
    EXPECT_EQ(work.irql, PASSIVE_LEVEL);
    EXPECT_EQ(work.device, device);
    while (!SoftNdkKmIsIdle()) std::this_thread::yield();
    IoFreeWorkItem(item);
    IoDeleteDevice(device);
}

struct DpcContext {
    KEVENT fired;
    KIRQL irql;
    std::atomic<int> count{0};
};
VOID DpcRoutine(PKDPC, PVOID context, PVOID, PVOID) {
    auto* dpc = static_cast<DpcContext*>(context);
    dpc->irql = KeGetCurrentIrql();
    if (++dpc->count == 3) KeSetEvent(&dpc->fired, IO_NO_INCREMENT, FALSE);
}

TEST(KmTimers, PeriodicTimerQueuesItsDpcAtDispatchLevel) {
    DpcContext context;
    KeInitializeEvent(&context.fired, NotificationEvent, FALSE);
    KDPC dpc;
    KeInitializeDpc(&dpc, DpcRoutine, &context);
    KTIMER timer;
    KeInitializeTimerEx(&timer, NotificationTimer);
    EXPECT_FALSE(KeSetTimerEx(&timer, RelativeMs(5), 5, &dpc));
    EXPECT_EQ(KeWaitForSingleObject(&context.fired, Executive, KernelMode, FALSE, nullptr), STATUS_SUCCESS);
    EXPECT_TRUE(KeCancelTimer(&timer));
    KeFlushQueuedDpcs();
    EXPECT_EQ(context.irql, DISPATCH_LEVEL);
    EXPECT_TRUE(KeReadStateTimer(&timer));
    KTIMER one_shot;
    KeInitializeTimer(&one_shot);
    KeSetTimer(&one_shot, RelativeMs(5), nullptr);
    EXPECT_EQ(KeWaitForSingleObject(&one_shot, Executive, KernelMode, FALSE, nullptr), STATUS_SUCCESS);
    LARGE_INTEGER delay = RelativeMs(1);
    EXPECT_EQ(KeDelayExecutionThread(KernelMode, FALSE, &delay), STATUS_SUCCESS);
}

TEST(KmPool, TagsAreTrackedAndNonPagedMemoryRegistersAsAnMdl) {
    SOFTNDK_KM_STATISTICS before, during, after;
    SoftNdkKmGetStatistics(&before);
    PVOID buffer = ExAllocatePoolWithTag(NonPagedPoolNx, 3 * PAGE_SIZE, 'tsTK');
    PVOID other = ExAllocatePool2(POOL_FLAG_NON_PAGED, 100, 'tsTK');
    ASSERT_NE(buffer, nullptr);
    ASSERT_NE(other, nullptr);
    SoftNdkKmGetStatistics(&during);
    EXPECT_EQ(during.PoolAllocations, before.PoolAllocations + 2);
    PMDL mdl = IoAllocateMdl(buffer, 3 * PAGE_SIZE, FALSE, FALSE, nullptr);
    ASSERT_NE(mdl, nullptr);
    MmBuildMdlForNonPagedPool(mdl);
    EXPECT_EQ(MmGetSystemAddressForMdlSafe(mdl, NormalPagePriority), buffer);
    IoFreeMdl(mdl);
    ExFreePoolWithTag(buffer, 'tsTK');
    ExFreePool(other);
    SoftNdkKmGetStatistics(&after);
    EXPECT_EQ(after.PoolAllocations, before.PoolAllocations);
}

TEST(KmPool, LookasideListsRecycleEntries) {
    NPAGED_LOOKASIDE_LIST list;
    ExInitializeNPagedLookasideList(&list, nullptr, nullptr, 0, 64, 'kaLK', 0);
    PVOID a = ExAllocateFromNPagedLookasideList(&list);
    ASSERT_NE(a, nullptr);
    ExFreeToNPagedLookasideList(&list, a);
    EXPECT_EQ(ExAllocateFromNPagedLookasideList(&list), a);
    ExFreeToNPagedLookasideList(&list, a);
    ExDeleteNPagedLookasideList(&list);
    LOOKASIDE_LIST_EX ex;
    ASSERT_EQ(ExInitializeLookasideListEx(&ex, nullptr, nullptr, NonPagedPoolNx, 0, 32, 'xeLK', 0), STATUS_SUCCESS);
    PVOID b = ExAllocateFromLookasideListEx(&ex);
    ExFreeToLookasideListEx(&ex, b);
    ExDeleteLookasideListEx(&ex);
}

TEST(KmRtl, UnicodeStringsAndStrsafe) {
    UNICODE_STRING name;
    RtlInitUnicodeString(&name, L"\\Driver\\FilePush");
    EXPECT_EQ(name.Length, 16 * sizeof(WCHAR));
    UNICODE_STRING upper;
    RtlInitUnicodeString(&upper, L"\\DRIVER\\FILEPUSH");
    EXPECT_TRUE(RtlEqualUnicodeString(&name, &upper, TRUE));
    EXPECT_FALSE(RtlEqualUnicodeString(&name, &upper, FALSE));
    WCHAR storage[32];
    UNICODE_STRING copy{0, sizeof(storage), storage};
    RtlCopyUnicodeString(&copy, &name);
    EXPECT_EQ(RtlAppendUnicodeToString(&copy, L"X"), STATUS_SUCCESS);
    EXPECT_EQ(copy.Length, 17 * sizeof(WCHAR));
    ANSI_STRING ansi;
    ASSERT_EQ(RtlUnicodeStringToAnsiString(&ansi, &copy, TRUE), STATUS_SUCCESS);
    EXPECT_STREQ(ansi.Buffer, "\\Driver\\FilePushX");
    RtlFreeAnsiString(&ansi);
    UNICODE_STRING number;
    RtlInitUnicodeString(&number, L"0x1F");
    ULONG value = 0;
    EXPECT_EQ(RtlUnicodeStringToInteger(&number, 0, &value), STATUS_SUCCESS);
    EXPECT_EQ(value, 31u);
    char text[8];
    EXPECT_EQ(RtlStringCbPrintfA(text, sizeof(text), "%d", 1234), STATUS_SUCCESS);
    EXPECT_EQ(RtlStringCbPrintfA(text, sizeof(text), "%s", "123456789"), STATUS_BUFFER_OVERFLOW);
    EXPECT_STREQ(text, "1234567");
    EXPECT_EQ(RtlUlongByteSwap(0x01020304u), 0x04030201u);
    EXPECT_TRUE(NT_ERROR(STATUS_INVALID_PARAMETER) && NT_WARNING(STATUS_BUFFER_OVERFLOW) &&
                NT_INFORMATION(0x40000000L) && !NT_ERROR(STATUS_SUCCESS));
}

TEST(KmWsk, ControlClientReturnsTheNdkDispatchAndOpensTheInterfaceAdapter) {
    WSK_CLIENT_DISPATCH client_dispatch{MAKE_WSK_VERSION(1, 0), 0, nullptr};
    WSK_CLIENT_NPI client{nullptr, &client_dispatch};
    WSK_REGISTRATION registration;
    ASSERT_EQ(WskRegister(&client, &registration), STATUS_SUCCESS);
    WSK_PROVIDER_NPI provider;
    ASSERT_EQ(WskCaptureProviderNPI(&registration, WSK_INFINITE_WAIT, &provider), STATUS_SUCCESS);
    WSK_PROVIDER_NDK_DISPATCH ndk{};
    SIZE_T returned = 0;
    EXPECT_EQ(provider.Dispatch->WskControlClient(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, nullptr, 4,
                                                  &ndk, &returned, nullptr),
              STATUS_BUFFER_TOO_SMALL);
    ASSERT_EQ(provider.Dispatch->WskControlClient(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, nullptr,
                                                  sizeof(ndk), &ndk, &returned, nullptr),
              STATUS_SUCCESS);
    EXPECT_EQ(returned, sizeof(ndk));
    EXPECT_EQ(provider.Dispatch->WskSocket(provider.Client, AF_INET, 1, 6, 0, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr),
              STATUS_NOT_SUPPORTED);

    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    config.CompletionMode = SOFTNDK_COMPLETION_PEND;
    ASSERT_EQ(SoftNdkKmRegisterInterface(7, &config), STATUS_SUCCESS);
    NDK_ADAPTER* adapter = nullptr;
    EXPECT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{3, 0}, 7, &adapter), NDIS_STATUS_BAD_VERSION)
        << "AI-08: a major the provider does not speak";
    EXPECT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 0}, 99, &adapter), STATUS_NOT_FOUND);
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 0}, 7, &adapter), STATUS_SUCCESS);
    EXPECT_EQ(adapter->Header.Version.Minor, 2);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof(info);
    EXPECT_EQ(adapter->Dispatch->NdkQueryAdapterInfo(adapter, &info, &size), STATUS_SUCCESS);
    EXPECT_EQ(info.RdmaTechnology, NdkiWarp) << "the provider speaks iWARP over TCP";
    ndk.WskCloseNdkAdapter(provider.Client, adapter);

    PMIB_UNICASTIPADDRESS_TABLE table = nullptr;
    ASSERT_EQ(GetUnicastIpAddressTable(AF_INET, &table), STATUS_SUCCESS);
    bool found = false;
    for (ULONG i = 0; i < table->NumEntries; ++i)
        found |= table->Table[i].InterfaceIndex == 7 &&
                 table->Table[i].Address.Ipv4.sin_addr.S_un.S_addr == RtlUlongByteSwap(0x7F000001u);
    EXPECT_TRUE(found);
    FreeMibTable(table);
    EXPECT_EQ(SoftNdkKmUnregisterInterface(7), STATUS_SUCCESS);
    WskReleaseProviderNPI(&registration);
    WskDeregister(&registration);
}

TEST(KmWsk, FaultSpecificationsParse) {
    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    ASSERT_EQ(SoftNdkKmParseFaults("NdkRegisterMr:nth=2:async:status=0xC000009A;NdkSend:p=0.5:seed=3", &config),
              STATUS_SUCCESS);
    ASSERT_EQ(config.FaultRuleCount, 2u);
    EXPECT_STREQ(config.FaultRules[0].FunctionName, "NdkRegisterMr");
    EXPECT_EQ(config.FaultRules[0].NthCall, 2u);
    EXPECT_TRUE(config.FaultRules[0].Asynchronous);
    EXPECT_EQ(config.FaultRules[1].Probability, 0.5);
    EXPECT_EQ(SoftNdkKmParseFaults("NdkSend:bogus", &config), STATUS_INVALID_PARAMETER);
}

// Issue 19 §2: every open of one interface is a handle on one device (a driver opens the interface again for each
// accepted socket and accepts with a QP of that second open); objects of two interfaces refuse, naming both.
// A WSK client with the NDK extension's dispatch, registered for one test and deregistered after it.
struct WskNdkClient {
    WSK_CLIENT_DISPATCH client_dispatch{MAKE_WSK_VERSION(1, 0), 0, nullptr};
    WSK_CLIENT_NPI client{nullptr, &client_dispatch};
    WSK_REGISTRATION registration{};
    WSK_PROVIDER_NPI provider{};
    WSK_PROVIDER_NDK_DISPATCH ndk{};
    bool registered = false;

    void Open() {
        ASSERT_EQ(WskRegister(&client, &registration), STATUS_SUCCESS);
        registered = true;
        ASSERT_EQ(WskCaptureProviderNPI(&registration, WSK_INFINITE_WAIT, &provider), STATUS_SUCCESS);
        SIZE_T returned = 0;
        ASSERT_EQ(provider.Dispatch->WskControlClient(provider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, nullptr,
                                                      sizeof(ndk), &ndk, &returned, nullptr),
                  STATUS_SUCCESS);
    }
    ~WskNdkClient() {
        if (!registered) return;
        if (provider.Client != nullptr) WskReleaseProviderNPI(&registration);
        WskDeregister(&registration);
    }
};

TEST(KmWsk, ISSUE_19_SeveralOpensOfOneInterfaceAreOneDevice) {
    WskNdkClient wsk;
    ASSERT_NO_FATAL_FAILURE(wsk.Open());
    WSK_PROVIDER_NPI& provider = wsk.provider;
    WSK_PROVIDER_NDK_DISPATCH& ndk = wsk.ndk;
    ASSERT_EQ(SoftNdkKmRegisterInterface(8, nullptr), STATUS_SUCCESS);
    ASSERT_EQ(SoftNdkKmRegisterInterface(9, nullptr), STATUS_SUCCESS);
    NDK_ADAPTER *first = nullptr, *second = nullptr, *other = nullptr;
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 2}, 8, &first), STATUS_SUCCESS);
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 1}, 8, &second), STATUS_SUCCESS);
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 2}, 9, &other), STATUS_SUCCESS);
    EXPECT_EQ(first, second) << "two opens of IfIndex 8: one device";
    EXPECT_NE(first, other) << "IfIndex 9 is another device";
    EXPECT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 3}, 8, &second), NDIS_STATUS_BAD_VERSION)
        << "the version is negotiated for every open, also one that would join the device";
    SOFTNDK_KM_STATISTICS statistics{};
    SoftNdkKmGetStatistics(&statistics);
    EXPECT_EQ(statistics.NdkAdapters, 3u) << "each open needs its close";

    // A PD and a CQ through the first open, a QP and a connector through the second, combined.
    NDK_PD* pd = nullptr;
    NDK_CQ* cq = nullptr;
    NDK_QP* qp = nullptr;
    auto created = [](PVOID, NTSTATUS, NDK_OBJECT_HEADER*) {};
    auto notify = [](PVOID, NTSTATUS) {};
    ASSERT_EQ(first->Dispatch->NdkCreatePd(first, created, nullptr, &pd), STATUS_SUCCESS);
    ASSERT_EQ(first->Dispatch->NdkCreateCq(first, 8, notify, nullptr, nullptr, created, nullptr, &cq), STATUS_SUCCESS);
    ASSERT_EQ(pd->Dispatch->NdkCreateQp(pd, cq, cq, nullptr, 4, 4, 1, 1, 0, created, nullptr, &qp), STATUS_SUCCESS);
    ndk.WskCloseNdkAdapter(provider.Client, first);  // returns at once: the second open holds the device
    NDK_PD* later = nullptr;
    ASSERT_EQ(second->Dispatch->NdkCreatePd(second, created, nullptr, &later), STATUS_SUCCESS)
        << "closing one open leaves the device and the objects made through it to the others";

    // Objects of two interfaces: refused, and the text names both adapters.
    NDK_CQ* foreign = nullptr;
    ASSERT_EQ(other->Dispatch->NdkCreateCq(other, 8, notify, nullptr, nullptr, created, nullptr, &foreign),
              STATUS_SUCCESS);
    NDK_QP* refused = nullptr;
    EXPECT_EQ(pd->Dispatch->NdkCreateQp(pd, foreign, foreign, nullptr, 4, 4, 1, 1, 0, created, nullptr, &refused),
              STATUS_INVALID_PARAMETER);
    const std::string why = SoftNdkGetLastErrorText();
    EXPECT_NE(why.find("objects of two devices"), std::string::npos) << why;
    char device_name[32];
    std::snprintf(device_name, sizeof(device_name), "%p", static_cast<void*>(first));
    EXPECT_NE(why.find(device_name), std::string::npos) << why;

    for (NDK_OBJECT_HEADER* object : {&qp->Header, &later->Header, &pd->Header, &cq->Header, &foreign->Header}) {
        auto close = *reinterpret_cast<NDK_FN_CLOSE_OBJECT const*>(reinterpret_cast<NDK_PD*>(object)->Dispatch);
        EXPECT_EQ(close(object, nullptr, nullptr), STATUS_SUCCESS);
    }
    ndk.WskCloseNdkAdapter(provider.Client, second);
    ndk.WskCloseNdkAdapter(provider.Client, other);
    SoftNdkKmGetStatistics(&statistics);
    EXPECT_EQ(statistics.NdkAdapters, 0u);
    EXPECT_EQ(SoftNdkKmUnregisterInterface(8), STATUS_SUCCESS);
    EXPECT_EQ(SoftNdkKmUnregisterInterface(9), STATUS_SUCCESS);
}

// AI-08 and spec decision "NDK 2.x": a driver built with WDK 10.0.26100 asks for NDK 2.0 only, as it does of
// Windows with real hardware (which opens it and answers NdkQueryAdapterInfo with 104 bytes). softndk opens it,
// reports its highest 2.x minor (2.1: the 2.1 connector slots and ProviderErrorCode are there) and gives the
// NDK_ADAPTER_INFO Windows gives on x64; a 1.2 consumer of the same interface is unchanged; a major 3 is refused.
TEST(KmWsk, AI_08_Ndk20OnlyConsumerOpensAndReadsAWindowsSizedAdapterInfo) {
    WskNdkClient wsk;
    ASSERT_NO_FATAL_FAILURE(wsk.Open());
    WSK_PROVIDER_NPI& provider = wsk.provider;
    WSK_PROVIDER_NDK_DISPATCH& ndk = wsk.ndk;
    ASSERT_EQ(SoftNdkKmRegisterInterface(11, nullptr), STATUS_SUCCESS);
    auto query = [](NDK_ADAPTER* adapter, NDK_ADAPTER_INFO* info) {
        ULONG size = 0;
        EXPECT_EQ(adapter->Dispatch->NdkQueryAdapterInfo(adapter, nullptr, &size), STATUS_BUFFER_TOO_SMALL);
        EXPECT_EQ(size, sizeof(NDK_ADAPTER_INFO)) << "AI-01: the required size";
        *info = NDK_ADAPTER_INFO{};
        EXPECT_EQ(adapter->Dispatch->NdkQueryAdapterInfo(adapter, info, &size), STATUS_SUCCESS);
        return size;
    };

    NDK_ADAPTER* v2 = nullptr;
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{2, 0}, 11, &v2), STATUS_SUCCESS)
        << "NDK 2.0 only, as a WDK 10.0.26100 driver asks";
    ASSERT_NE(v2, nullptr);
    EXPECT_EQ(v2->Header.ObjectType, NdkObjectTypeAdapter);
    EXPECT_EQ(v2->Header.Version.Major, 2);
    EXPECT_EQ(v2->Header.Version.Minor, 1) << "AI-08: the provider's highest minor of the major asked for";
    NDK_ADAPTER_INFO info;
    const ULONG size = query(v2, &info);
    if (sizeof(void*) == 8) {
        EXPECT_EQ(size, 104u) << "the size Windows answers on x64";
    }
    EXPECT_EQ(info.Version.Major, 2);
    EXPECT_EQ(info.Version.Minor, 1);
    EXPECT_EQ(info.RdmaTechnology, NdkiWarp);
    EXPECT_GE(info.FRMRPageCount, 16u);
    NDK_PD* pd = nullptr;
    auto created = [](PVOID, NTSTATUS, NDK_OBJECT_HEADER*) {};
    ASSERT_EQ(v2->Dispatch->NdkCreatePd(v2, created, nullptr, &pd), STATUS_SUCCESS);
    EXPECT_EQ(pd->Header.Version.Major, 2) << "object headers carry the negotiated version too";
    EXPECT_EQ(pd->Header.Version.Minor, 1);
    EXPECT_EQ(pd->Dispatch->NdkClosePd(&pd->Header, nullptr, nullptr), STATUS_SUCCESS);

    NDK_ADAPTER* v21 = nullptr;
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{2, 1}, 11, &v21), STATUS_SUCCESS);
    EXPECT_EQ(v21, v2) << "issue 19 §2: another 2.x open of the interface is a handle on the same device";

    NDK_ADAPTER* v1 = nullptr;
    ASSERT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{1, 2}, 11, &v1), STATUS_SUCCESS);
    EXPECT_NE(v1, v2) << "a 1.x consumer gets an adapter that speaks 1.x";
    EXPECT_EQ(v1->Header.Version.Major, 1);
    EXPECT_EQ(v1->Header.Version.Minor, 2);
    EXPECT_EQ(query(v1, &info), sizeof(NDK_ADAPTER_INFO)) << "1.x and 2.x lay NDK_ADAPTER_INFO out alike";
    EXPECT_EQ(info.Version.Major, 1);
    EXPECT_EQ(info.Version.Minor, 2);

    NDK_ADAPTER* refused = nullptr;
    EXPECT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{3, 0}, 11, &refused), NDIS_STATUS_BAD_VERSION);
    EXPECT_EQ(ndk.WskOpenNdkAdapter(provider.Client, NDK_VERSION{2, 2}, 11, &refused), NDIS_STATUS_BAD_VERSION)
        << "a 2.x minor above ours";
    EXPECT_EQ(refused, nullptr);

    ndk.WskCloseNdkAdapter(provider.Client, v21);
    ndk.WskCloseNdkAdapter(provider.Client, v2);
    ndk.WskCloseNdkAdapter(provider.Client, v1);
    SOFTNDK_KM_STATISTICS statistics{};
    SoftNdkKmGetStatistics(&statistics);
    EXPECT_EQ(statistics.NdkAdapters, 0u);
    EXPECT_EQ(SoftNdkKmUnregisterInterface(11), STATUS_SUCCESS);
}

}  // namespace
