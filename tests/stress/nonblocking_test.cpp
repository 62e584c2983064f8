// Review finding 6 (CB-12): calls that may be made at DISPATCH_LEVEL, from inside a completion callback, return at
// once and finish later. Each is issued from inside a CQ notification while another thread holds what it would
// have to wait for (a token reference; a post inside the QP). The call must return before the holder lets go; its
// completion (the invalidate's CQ entry, the close completion, the disconnect completion) comes after. Before the
// fix each of these spun until the holder let go. Label: concurrency (ASan and TSan runs).
#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "api/objects.h"
#include "support/connected_pair.h"

namespace softndk::test {
namespace {

using Clock = std::chrono::steady_clock;

// Holds something for up to two seconds on its own thread, or until told to let go.
class Holder {
public:
    Holder(std::function<void()> take, std::function<void()> release)
        : thread_([this, take = std::move(take), release = std::move(release)] {
              take();
              held_ = true;
              for (int i = 0; i < 2000 && !let_go_.load(); ++i) usleep(1000);
              released_at_ = Clock::now();
              released_ = true;
              release();
          }) {
        while (!held_.load()) std::this_thread::yield();
    }
    ~Holder() {
        let_go_ = true;
        thread_.join();
    }
    void LetGo() { let_go_ = true; }
    bool released() const { return released_.load(); }

private:
    std::atomic<bool> held_{false};
    std::atomic<bool> let_go_{false};
    std::atomic<bool> released_{false};
    Clock::time_point released_at_;
    std::thread thread_;
};

// A CQ whose notification runs a test action on the provider thread (the consumer's DISPATCH_LEVEL context).
struct InsideNotification {
    std::function<void()> action;
    std::atomic<bool> ran{false};
    static VOID OnNotify(PVOID context, NTSTATUS) {
        auto* self = static_cast<InsideNotification*>(context);
        if (self->ran.exchange(true)) return;
        self->action();
    }
};

class NonBlockingTest : public ConnectedPairTest {
protected:
    // Runs `action` inside a CQ notification and waits until it has returned.
    void RunInsideNotification(std::function<void()> action) {
        InsideNotification inside;
        inside.action = std::move(action);
        Completion created;
        NDK_CQ* cq = nullptr;
        ASSERT_EQ(created.Wait(adapter_->Dispatch->NdkCreateCq(adapter_, 8, &InsideNotification::OnNotify, &inside,
                                                               nullptr, &Completion::OnCreate, &created, &cq)),
                  STATUS_SUCCESS);
        if (cq == nullptr) cq = reinterpret_cast<NDK_CQ*>(created.object());
        NDK_QP* trigger = CreateQp(cq, cq, nullptr);
        NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 8);
        ASSERT_EQ(trigger->Dispatch->NdkReceive(trigger, nullptr, &sge, 1), STATUS_SUCCESS);
        cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
        trigger->Dispatch->NdkFlush(trigger);  // one cancelled receive: the notification
        EXPECT_TRUE(WaitFor([&] { return inside.ran.load(); }, 10000));
        Close(&trigger->Header);
        Close(&cq->Header);  // CQ-16: waits for the notification to return
    }
    mem::TokenTable& tokens() { return api::FromHandle<api::AdapterObject>(adapter_)->tokens; }
    // Another thread holds a reference on `token` (an access in flight) until LetGo() or two seconds.
    struct TokenHold {
        mem::TokenRef ref;
        std::unique_ptr<Holder> holder;
    };
    std::unique_ptr<TokenHold> HoldToken(UINT32 token) {
        auto hold = std::make_unique<TokenHold>();
        TokenHold* raw = hold.get();
        hold->holder = std::make_unique<Holder>(
            [this, raw, token] { raw->ref = tokens().Acquire(token, mem::TokenKind::kRemote); },
            [raw] { raw->ref.Reset(); });
        return hold;
    }
    engine::PostGate& GateOf(NDK_QP* qp) { return api::FromHandle<api::QpObject>(qp)->qp.gate(); }

    NDK_MR* FastRegistered(std::vector<uint8_t>& lam_storage, std::unique_ptr<LockedBuffer>& memory) {
        NDK_MR* fast = CreateMr(true);
        EXPECT_EQ(InitializeFast(fast, 1, TRUE), STATUS_SUCCESS);
        memory = std::make_unique<LockedBuffer>(1);
        lam_storage.resize(NDK_LAM_SIZE(1));
        auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data());
        ULONG size = static_cast<ULONG>(lam_storage.size());
        ULONG fbo = 0;
        EXPECT_EQ(BuildLam(memory->mdl(), PAGE_SIZE, lam, &size, &fbo), STATUS_SUCCESS);
        EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, fast, 1, lam->AdapterPageArray, 0, PAGE_SIZE,
                                                   reinterpret_cast<PVOID>(0x700000000000ull),
                                                   NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeFastRegister);
        return fast;
    }
};
SOFTNDK_ALL_MODES(NonBlockingTest);

TEST_P(NonBlockingTest, CB_12_FR_22_InvalidateOfAnFrmrReturnsAtOnceAndCompletesAfterTheDrain) {
    std::vector<uint8_t> lam_storage;
    std::unique_ptr<LockedBuffer> memory;
    NDK_MR* fast = FastRegistered(lam_storage, memory);
    const UINT32 token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
    std::unique_ptr<TokenHold> hold = HoldToken(token);
    Holder& holder = *hold->holder;
    ASSERT_TRUE(hold->ref);
    std::atomic<bool> returned_while_held{false};
    NTSTATUS status = STATUS_UNSUCCESSFUL;
    RunInsideNotification([&] {
        status = qp_b_->Dispatch->NdkInvalidate(qp_b_, reinterpret_cast<PVOID>(0x1A), &fast->Header, 0);
        returned_while_held = !holder.released();
    });
    EXPECT_EQ(status, STATUS_SUCCESS);
    EXPECT_TRUE(returned_while_held.load()) << "NdkInvalidate waited for the access in flight";
    EXPECT_EQ(Pending(cq_b_), 0u) << "no completion while the access is in flight";
    holder.LetGo();
    const NDK_RESULT_EX result = Poll(cq_b_);
    EXPECT_EQ(result.Type, NdkOperationTypeInvalidate);
    EXPECT_EQ(result.RequestContext, reinterpret_cast<PVOID>(0x1A));
    EXPECT_EQ(result.Status, STATUS_SUCCESS);
    EXPECT_TRUE(holder.released());
    adapter_->Dispatch->NdkReleaseLAM(adapter_, reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data()));
    Close(&fast->Header);
}

TEST_P(NonBlockingTest, CB_12_FR_22_CompletionsBehindAPendingInvalidateWaitForIt) {
    std::vector<uint8_t> lam_storage;
    std::unique_ptr<LockedBuffer> memory;
    NDK_MR* fast = FastRegistered(lam_storage, memory);
    const UINT32 token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
    std::unique_ptr<TokenHold> hold = HoldToken(token);
    Holder& holder = *hold->holder;
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, reinterpret_cast<PVOID>(1), &fast->Header, 0), STATUS_SUCCESS);
    NDK_SGE sge = Sge(mr_b_, buffer_b_->data(), 8);
    ASSERT_EQ(qp_b_->Dispatch->NdkWrite(qp_b_, reinterpret_cast<PVOID>(2), &sge, 1, RemoteAddress(*buffer_a_),
                                        mr_a_->Dispatch->NdkGetRemoteTokenFromMr(mr_a_), 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Pending(cq_b_), 0u) << "the write's completion waits behind the invalidate (posting order)";
    holder.LetGo();
    EXPECT_EQ(Poll(cq_b_).RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(Poll(cq_b_).RequestContext, reinterpret_cast<PVOID>(2));
    adapter_->Dispatch->NdkReleaseLAM(adapter_, reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data()));
    Close(&fast->Header);
}

// FR-24: requests act in posting order. A FastRegister of the same MR posted right behind an invalidate that is
// still draining is accepted and takes effect when the drain ends (before, it failed INVALID_DEVICE_STATE).
TEST_P(NonBlockingTest, FR_24_FastRegisterBehindADrainingInvalidateTakesEffectInOrder) {
    std::vector<uint8_t> lam_storage;
    std::unique_ptr<LockedBuffer> memory;
    NDK_MR* fast = FastRegistered(lam_storage, memory);
    const UINT32 old_token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
    auto* lam = reinterpret_cast<NDK_LOGICAL_ADDRESS_MAPPING*>(lam_storage.data());
    std::unique_ptr<TokenHold> hold = HoldToken(old_token);
    Holder& holder = *hold->holder;
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, reinterpret_cast<PVOID>(1), &fast->Header, 0), STATUS_SUCCESS);
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, reinterpret_cast<PVOID>(2), fast, 1, lam->AdapterPageArray, 0,
                                               PAGE_SIZE, reinterpret_cast<PVOID>(0x710000000000ull),
                                               NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_SUCCESS);
    EXPECT_EQ(qp_b_->Dispatch->NdkFastRegister(qp_b_, nullptr, fast, 1, lam->AdapterPageArray, 0, PAGE_SIZE,
                                               reinterpret_cast<PVOID>(0x710000000000ull), 0),
              STATUS_INVALID_DEVICE_STATE)
        << "a second registration behind the same invalidate is refused";
    EXPECT_EQ(Pending(cq_b_), 0u);
    holder.LetGo();
    const NDK_RESULT_EX invalidated = Poll(cq_b_);
    const NDK_RESULT_EX registered = Poll(cq_b_);
    EXPECT_EQ(invalidated.RequestContext, reinterpret_cast<PVOID>(1));
    EXPECT_EQ(invalidated.Type, NdkOperationTypeInvalidate);
    EXPECT_EQ(registered.RequestContext, reinterpret_cast<PVOID>(2));
    EXPECT_EQ(registered.Type, NdkOperationTypeFastRegister);
    EXPECT_EQ(registered.Status, STATUS_SUCCESS);
    const UINT32 new_token = fast->Dispatch->NdkGetRemoteTokenFromMr(fast);
    // FR-19: available once registered; AMB-39 (issue 19 §2): by default the MR keeps its token across cycles.
    EXPECT_EQ(new_token, old_token) << "AMB-39: the token read before the invalidate serves again";
    std::memset(buffer_a_->data(), 0x3C, 64);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, 0x710000000000ull + 8, new_token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(memory->data()[8], 0x3C) << "the new registration maps the LAM's page";
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &fast->Header, 0), STATUS_SUCCESS);
    Poll(cq_b_);
    adapter_->Dispatch->NdkReleaseLAM(adapter_, lam);
    Close(&fast->Header);
}

// MW-13 / FR-24: a Bind of a window posted right behind its draining invalidate binds when the drain ends.
TEST_P(NonBlockingTest, MW_13_BindBehindADrainingInvalidateTakesEffectInOrder) {
    Completion made;
    NDK_MW* mw = nullptr;
    ASSERT_EQ(made.Wait(pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &made, &mw)), STATUS_SUCCESS);
    if (mw == nullptr) mw = reinterpret_cast<NDK_MW*>(made.object());
    ASSERT_EQ(qp_b_->Dispatch->NdkBind(qp_b_, nullptr, mr_b_, mw, buffer_b_->data(), PAGE_SIZE,
                                       NDK_OP_FLAG_ALLOW_REMOTE_READ),
              STATUS_SUCCESS);
    Poll(cq_b_);
    const UINT32 old_token = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    std::unique_ptr<TokenHold> hold = HoldToken(old_token);
    Holder& holder = *hold->holder;
    ASSERT_EQ(qp_b_->Dispatch->NdkInvalidate(qp_b_, reinterpret_cast<PVOID>(1), &mw->Header, 0), STATUS_SUCCESS);
    EXPECT_EQ(qp_b_->Dispatch->NdkBind(qp_b_, reinterpret_cast<PVOID>(2), mr_b_, mw, buffer_b_->data() + PAGE_SIZE,
                                       PAGE_SIZE, NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
              STATUS_SUCCESS);
    EXPECT_EQ(Pending(cq_b_), 0u);
    holder.LetGo();
    EXPECT_EQ(Poll(cq_b_).RequestContext, reinterpret_cast<PVOID>(1));
    const NDK_RESULT_EX bound = Poll(cq_b_);
    EXPECT_EQ(bound.RequestContext, reinterpret_cast<PVOID>(2));
    EXPECT_EQ(bound.Type, NdkOperationTypeBind);
    const UINT32 new_token = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    EXPECT_NE(new_token, 0u);
    EXPECT_NE(new_token, old_token);
    std::memset(buffer_a_->data(), 0x4D, 64);
    NDK_SGE sge = Sge(mr_a_, buffer_a_->data(), 64);
    ASSERT_EQ(qp_a_->Dispatch->NdkWrite(qp_a_, nullptr, &sge, 1, RemoteAddress(*buffer_b_, PAGE_SIZE), new_token, 0),
              STATUS_SUCCESS);
    EXPECT_EQ(Poll(cq_a_).Status, STATUS_SUCCESS);
    EXPECT_EQ(buffer_b_->data()[PAGE_SIZE + 63], 0x4D);
    Close(&mw->Header);
}

TEST_P(NonBlockingTest, CB_12_MW_13_InvalidateAndCloseOfAWindowReturnAtOnce) {
    Completion made;
    NDK_MW* mw = nullptr;
    ASSERT_EQ(made.Wait(pd_->Dispatch->NdkCreateMw(pd_, &Completion::OnCreate, &made, &mw)), STATUS_SUCCESS);
    if (mw == nullptr) mw = reinterpret_cast<NDK_MW*>(made.object());
    for (const bool close : {false, true}) {
        ASSERT_EQ(qp_b_->Dispatch->NdkBind(qp_b_, nullptr, mr_b_, mw, buffer_b_->data(), PAGE_SIZE,
                                           NDK_OP_FLAG_ALLOW_REMOTE_READ),
                  STATUS_SUCCESS);
        EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeBind);
        const UINT32 token = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
        std::unique_ptr<TokenHold> hold = HoldToken(token);
        Holder& holder = *hold->holder;
        ASSERT_TRUE(hold->ref);
        std::atomic<bool> returned_while_held{false};
        NTSTATUS status = STATUS_UNSUCCESSFUL;
        Completion closed;
        RunInsideNotification([&] {
            status = close ? mw->Dispatch->NdkCloseMw(&mw->Header, &Completion::OnClose, &closed)
                           : qp_b_->Dispatch->NdkInvalidate(qp_b_, nullptr, &mw->Header, 0);
            returned_while_held = !holder.released();
        });
        EXPECT_TRUE(returned_while_held.load()) << (close ? "NdkCloseMw" : "NdkInvalidate") << " waited";
        if (close) {
            EXPECT_EQ(status, STATUS_PENDING) << "the close pends while the window is in use";
            EXPECT_EQ(closed.calls(), 0);
            holder.LetGo();
            EXPECT_EQ(closed.Wait(status), STATUS_SUCCESS);
        } else {
            EXPECT_EQ(status, STATUS_SUCCESS);
            EXPECT_EQ(Pending(cq_b_), 0u);
            holder.LetGo();
            EXPECT_EQ(Poll(cq_b_).Type, NdkOperationTypeInvalidate);
        }
        EXPECT_TRUE(holder.released());
    }
}

TEST_P(NonBlockingTest, CB_12_CM_24_DisconnectWithAPostInsideReturnsAtOnce) {
    Completion first;
    NTSTATUS first_returned = connector_a_->Dispatch->NdkDisconnect(connector_a_, &Completion::OnRequest, &first);
    ASSERT_TRUE(WaitFor([&] { return disconnects_b_.count == 1; }));
    Holder holder([&] { EXPECT_TRUE(GateOf(qp_b_).Enter()); }, [&] { GateOf(qp_b_).Leave(); });
    std::atomic<bool> returned_while_held{false};
    NTSTATUS status = STATUS_UNSUCCESSFUL;
    Completion second;
    RunInsideNotification([&] {
        status = connector_b_->Dispatch->NdkDisconnect(connector_b_, &Completion::OnRequest, &second);
        returned_while_held = !holder.released();
    });
    EXPECT_TRUE(returned_while_held.load()) << "NdkDisconnect waited for the post";
    EXPECT_EQ(status, STATUS_PENDING) << "CM-24 (b): it completes once no DMA of the QP is running";
    EXPECT_EQ(second.calls(), 0);
    holder.LetGo();
    EXPECT_EQ(second.Wait(status), STATUS_SUCCESS);
    EXPECT_EQ(first.Wait(first_returned), STATUS_SUCCESS);
}

TEST_P(NonBlockingTest, CB_12_LIFE_09_ConnectorCloseWithAPostInsideReturnsAtOnce) {
    Holder holder([&] { EXPECT_TRUE(GateOf(qp_a_).Enter()); }, [&] { GateOf(qp_a_).Leave(); });
    std::atomic<bool> returned_while_held{false};
    NTSTATUS status = STATUS_UNSUCCESSFUL;
    Completion closed;
    RunInsideNotification([&] {
        status = connector_a_->Dispatch->NdkCloseConnector(&connector_a_->Header, &Completion::OnClose, &closed);
        returned_while_held = !holder.released();
    });
    EXPECT_TRUE(returned_while_held.load()) << "NdkCloseConnector waited for the post";
    EXPECT_EQ(status, STATUS_PENDING);
    EXPECT_EQ(closed.calls(), 0);
    holder.LetGo();
    EXPECT_EQ(closed.Wait(status), STATUS_SUCCESS);
    connector_a_ = nullptr;
}

TEST_P(NonBlockingTest, CB_12_CM_09_RejectWithAPostInsideReturnsAtOnce) {
    // AMB-33: the active side rejects after the passive accepted; the link exists and a post is inside it.
    NDK_QP* active_qp = CreateQp(cq_a_, cq_a_, nullptr);
    NDK_QP* passive_qp = CreateQp(cq_b_, cq_b_, nullptr);
    NDK_CONNECTOR* active = CreateConnector();
    connect_events_.incoming = nullptr;
    Completion connected;
    NTSTATUS connect_returned = StartConnect(active, active_qp, ListenerPort(), connected, 1);
    ASSERT_TRUE(WaitFor([&] { return connect_events_.incoming.load() != nullptr; }));
    NDK_CONNECTOR* passive = connect_events_.incoming;
    Completion accepted;
    NTSTATUS accept_returned = passive->Dispatch->NdkAccept(passive, passive_qp, 1, 1, nullptr, 0, nullptr, nullptr,
                                                            &Completion::OnRequest, &accepted);
    ASSERT_EQ(connected.Wait(connect_returned), STATUS_SUCCESS);
    Holder holder([&] { EXPECT_TRUE(GateOf(active_qp).Enter()); }, [&] { GateOf(active_qp).Leave(); });
    std::atomic<bool> returned_while_held{false};
    NTSTATUS status = STATUS_UNSUCCESSFUL;
    RunInsideNotification([&] {
        status = active->Dispatch->NdkReject(active, nullptr, 0);
        returned_while_held = !holder.released();
    });
    EXPECT_TRUE(returned_while_held.load()) << "NdkReject waited for the post";
    EXPECT_EQ(status, STATUS_SUCCESS);
    EXPECT_EQ(accepted.Wait(accept_returned), STATUS_CONNECTION_ABORTED);
    holder.LetGo();
    for (NDK_OBJECT_HEADER* object : {&active->Header, &passive->Header, &active_qp->Header, &passive_qp->Header})
        Close(object);
}

}  // namespace
}  // namespace softndk::test
