// IO_WORKITEM / WORK_QUEUE_ITEM on a real worker pool (issue 9 §2). Routines run at PASSIVE_LEVEL on one of
// four worker threads; a queued IO_WORKITEM holds a reference on its device object, as in the I/O manager.
// Queueing an item twice and freeing a queued item are Verifier reports (bug check 0xC9 style).
#include <atomic>
#include <deque>
#include <thread>
#include <vector>

#include "km/km_internal.h"

struct _IO_WORKITEM {
    ULONG magic;
    PVOID io_object;
    bool allocated;  // IoAllocateWorkItem (vs IoInitializeWorkItem in caller memory)
    bool queued;
    PIO_WORKITEM_ROUTINE routine;
    PIO_WORKITEM_ROUTINE_EX routine_ex;
    PVOID context;
};

namespace softndk::km {
namespace {

constexpr ULONG kWorkItemMagic = 0x6B774F49;  // "IOwk"
constexpr int kWorkers = 4;

struct Job {
    PIO_WORKITEM io_item;      // or
    PWORK_QUEUE_ITEM ex_item;  // one of the two
};
struct Pool {
    std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable idle;
    std::deque<Job> queue;
    uint32_t running = 0;
    bool stopping = false;
    std::vector<std::thread> threads;
};
Pool& Workers() {
    static auto* pool = new Pool();
    return *pool;
}

void RunJob(const Job& job) {
    const char* what = "work item routine";
    void* routine = nullptr;
    if (job.io_item != nullptr) {
        PIO_WORKITEM item = job.io_item;
        auto* device = static_cast<PDEVICE_OBJECT>(item->io_object);
        PIO_WORKITEM_ROUTINE simple = item->routine;
        PIO_WORKITEM_ROUTINE_EX extended = item->routine_ex;
        PVOID context = item->context;
        {
            std::lock_guard lock(Workers().mutex);
            item->queued = false;  // the routine may queue it again
        }
        if (extended != nullptr) {
            routine = reinterpret_cast<void*>(extended);
            extended(item->io_object, context, item);
        } else {
            routine = reinterpret_cast<void*>(simple);
            simple(device, context);
        }
        if (device != nullptr) InterlockedDecrement(&device->ReferenceCount);
    } else {
        PWORK_QUEUE_ITEM item = job.ex_item;
        PWORKER_THREAD_ROUTINE worker = item->WorkerRoutine;
        PVOID parameter = item->Parameter;
        item->List.Flink = nullptr;
        routine = reinterpret_cast<void*>(worker);
        worker(parameter);
    }
    if (CurrentIrql() != PASSIVE_LEVEL) {
        Report("IRQL_UNEXPECTED_VALUE", kDriverVerifierDetectedViolation, what, "work item routine %p returned at %s",
               routine, IrqlName(CurrentIrql()));
        SetIrql(PASSIVE_LEVEL);
    }
}

void Run() {
    Pool& pool = Workers();
    std::unique_lock lock(pool.mutex);
    while (true) {
        pool.wake.wait(lock, [&] { return pool.stopping || !pool.queue.empty(); });
        if (pool.queue.empty()) return;
        Job job = pool.queue.front();
        pool.queue.pop_front();
        ++pool.running;
        lock.unlock();
        RunJob(job);
        lock.lock();
        --pool.running;
        if (pool.queue.empty() && pool.running == 0) pool.idle.notify_all();
    }
}

void Enqueue(const Job& job) {
    Pool& pool = Workers();
    static std::once_flag once;
    std::call_once(once, [&pool] {
        for (int i = 0; i < kWorkers; ++i) pool.threads.emplace_back(Run);
    });
    {
        std::lock_guard lock(pool.mutex);
        pool.queue.push_back(job);
    }
    pool.wake.notify_one();
}

bool ValidItem(PIO_WORKITEM item, const char* call) {
    if (item != nullptr && item->magic == kWorkItemMagic) return true;
    Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, call,
           "%p is not an initialised IO_WORKITEM", static_cast<void*>(item));
    return false;
}

void QueueIoItem(PIO_WORKITEM item, PIO_WORKITEM_ROUTINE routine, PIO_WORKITEM_ROUTINE_EX routine_ex, PVOID context,
                 const char* call) {
    RequireIrqlAtMost(DISPATCH_LEVEL, call);
    if (!ValidItem(item, call)) return;
    {
        std::lock_guard lock(Workers().mutex);
        if (item->queued) {
            Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, call,
                   "IO_WORKITEM %p is queued again before its routine ran", static_cast<void*>(item));
            return;
        }
        item->queued = true;
        item->routine = routine;
        item->routine_ex = routine_ex;
        item->context = context;
    }
    if (item->io_object != nullptr) InterlockedIncrement(&static_cast<PDEVICE_OBJECT>(item->io_object)->ReferenceCount);
    Enqueue(Job{item, nullptr});
}

}  // namespace

ULONG WorkItemsOutstanding() {
    Pool& pool = Workers();
    std::lock_guard lock(pool.mutex);
    return static_cast<ULONG>(pool.queue.size() + pool.running);
}

void ShutdownWorkers() {
    Pool& pool = Workers();
    {
        std::unique_lock lock(pool.mutex);
        pool.idle.wait(lock, [&] { return pool.queue.empty() && pool.running == 0; });
        pool.stopping = true;
    }
    pool.wake.notify_all();
    for (std::thread& thread : pool.threads) thread.join();
    pool.threads.clear();
}

}  // namespace softndk::km

using namespace softndk::km;

extern "C" {

ULONG IoSizeofWorkItem(void) {
    return sizeof(IO_WORKITEM);
}

VOID IoInitializeWorkItem(PVOID IoObject, PIO_WORKITEM IoWorkItem) {
    *IoWorkItem = IO_WORKITEM{kWorkItemMagic, IoObject, false, false, nullptr, nullptr, nullptr};
}

PIO_WORKITEM IoAllocateWorkItem(PDEVICE_OBJECT DeviceObject) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "IoAllocateWorkItem");
    if (DeviceObject == nullptr) return nullptr;  // as in Windows: a work item needs a device object
    auto* item = static_cast<PIO_WORKITEM>(SoftNdkKmAllocatePool2(POOL_FLAG_NON_PAGED, sizeof(IO_WORKITEM), 'kWoI'));
    if (item == nullptr) return nullptr;
    IoInitializeWorkItem(DeviceObject, item);
    item->allocated = true;
    return item;
}

VOID IoUninitializeWorkItem(PIO_WORKITEM IoWorkItem) {
    if (!ValidItem(IoWorkItem, "IoUninitializeWorkItem")) return;
    bool queued;
    {
        std::lock_guard lock(Workers().mutex);
        queued = IoWorkItem->queued;
    }
    if (queued) {
        Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, "IoFreeWorkItem",
               "IO_WORKITEM %p is freed while it is still queued", static_cast<void*>(IoWorkItem));
        return;
    }
    IoWorkItem->magic = 0;
}

VOID IoFreeWorkItem(PIO_WORKITEM IoWorkItem) {
    if (!ValidItem(IoWorkItem, "IoFreeWorkItem")) return;
    bool allocated = IoWorkItem->allocated;
    IoUninitializeWorkItem(IoWorkItem);
    if (IoWorkItem->magic == 0 && allocated) SoftNdkKmFreePool(IoWorkItem);
}

VOID IoQueueWorkItem(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE WorkerRoutine, WORK_QUEUE_TYPE, PVOID Context) {
    QueueIoItem(IoWorkItem, WorkerRoutine, nullptr, Context, "IoQueueWorkItem");
}

VOID IoQueueWorkItemEx(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE_EX WorkerRoutine, WORK_QUEUE_TYPE, PVOID Context) {
    QueueIoItem(IoWorkItem, nullptr, WorkerRoutine, Context, "IoQueueWorkItemEx");
}

VOID ExQueueWorkItem(PWORK_QUEUE_ITEM WorkItem, WORK_QUEUE_TYPE) {
    RequireIrqlAtMost(DISPATCH_LEVEL, "ExQueueWorkItem");
    if (WorkItem->List.Flink != nullptr) {
        Report("DRIVER_VERIFIER_IOMANAGER_VIOLATION", kDriverVerifierIoManagerViolation, "ExQueueWorkItem",
               "WORK_QUEUE_ITEM %p is queued again before its routine ran", static_cast<void*>(WorkItem));
        return;
    }
    WorkItem->List.Flink = &WorkItem->List;  // marks it queued
    Enqueue(Job{nullptr, WorkItem});
}

}  // extern "C"
