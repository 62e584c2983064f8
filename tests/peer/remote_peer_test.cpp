// The data path with the peer in another process (issue 7 §5, third configuration): this process is the
// initiator; ndk_test_peer, started per test, is the responder with its own adapter, in the same completion mode.
// The connection is iWARP/TCP, chosen by the default transport (the listener is in another process). The peer
// is driven over a control socket (tests/peer/peer_protocol.h): what it registered, received and holds in memory
// is checked there, so nothing is shared between the two sides but the wire.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/transport.h"
#include "peer/peer_protocol.h"
#include "support/connected_pair.h"

#ifndef SOFTNDK_TEST_PEER
#error "SOFTNDK_TEST_PEER (the path of ndk_test_peer) is set by tests/CMakeLists.txt"
#endif

namespace softndk::test {
namespace {

using peer::Op;
using peer::Reply;
using peer::Request;

struct PeerRegion {
    uint32_t index = 0;
    UINT32 token = 0;
    UINT64 address = 0;
};

class RemotePeerTest : public AdapterTest {
protected:
    static constexpr size_t kPages = 4;

    void SetUp() override {
        AdapterTest::SetUp();
        if (HasFatalFailure()) return;
        ASSERT_NO_FATAL_FAILURE(StartPeer());
        cq_ = CreateCq();
        qp_ = CreateQp();
        buffer_ = std::make_unique<LockedBuffer>(kPages);
        mr_ = CreateMr(false);
        ASSERT_EQ(
            Register(mr_, buffer_->mdl(), buffer_->bytes(),
                     NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
            STATUS_SUCCESS);
        ASSERT_NO_FATAL_FAILURE(Connect());
    }

    void TearDown() override {
        if (peer_pid_ > 0) {
            Request exit{Op::kExit, 0, 0, 0, 0};
            ::send(control_, &exit, sizeof(exit), MSG_NOSIGNAL);
            ReapPeer(10000);
        }
        if (control_ >= 0) ::close(control_);
        if (connector_ != nullptr) Close(&connector_->Header);
        if (qp_ != nullptr) Close(&qp_->Header);
        if (cq_ != nullptr) Close(&cq_->Header);
        if (mr_ != nullptr) Close(&mr_->Header);
        buffer_.reset();
        AdapterTest::TearDown();
    }

    // ---- the peer process ----
    void StartPeer() {
        int pair[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
        const std::string fd = std::to_string(pair[1]);
        const std::string mode = std::to_string(static_cast<int>(Mode()));
        peer_pid_ = fork();
        ASSERT_GE(peer_pid_, 0);
        if (peer_pid_ == 0) {
            ::close(pair[0]);
            execl(SOFTNDK_TEST_PEER, "ndk_test_peer", "--control-fd", fd.c_str(), "--mode", mode.c_str(), nullptr);
            _exit(127);
        }
        ::close(pair[1]);
        control_ = pair[0];
        Reply hello{};
        ASSERT_TRUE(Receive(&hello, nullptr)) << "the peer did not start";
        ASSERT_EQ(hello.status, STATUS_SUCCESS);
        port_ = static_cast<uint16_t>(hello.value);
    }
    bool Receive(Reply* reply, std::vector<uint8_t>* payload, int milliseconds = 20000) {
        pollfd ready{control_, POLLIN, 0};
        if (::poll(&ready, 1, milliseconds) != 1) return false;
        std::vector<uint8_t> message(sizeof(Reply) + peer::kMaxPayload);
        const ssize_t got = ::recv(control_, message.data(), message.size(), 0);
        if (got < static_cast<ssize_t>(sizeof(Reply))) return false;
        std::memcpy(reply, message.data(), sizeof(Reply));
        if (payload != nullptr) payload->assign(message.begin() + sizeof(Reply), message.begin() + got);
        return true;
    }
    Reply Call(Op op, uint32_t mr = 0, uint64_t a = 0, uint64_t b = 0, uint64_t c = 0,
               std::vector<uint8_t>* payload = nullptr) {
        Request request{op, mr, a, b, c};
        Reply reply{};
        reply.status = STATUS_INTERNAL_ERROR;
        EXPECT_EQ(::send(control_, &request, sizeof(request), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(request)));
        EXPECT_TRUE(Receive(&reply, payload)) << "the peer did not answer";
        return reply;
    }
    void ReapPeer(int milliseconds) {
        for (int waited = 0; waited < milliseconds; waited += 10) {
            int status = 0;
            if (waitpid(peer_pid_, &status, WNOHANG) == peer_pid_) {
                EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the peer failed: " << status;
                peer_pid_ = -1;
                return;
            }
            usleep(10000);
        }
        ADD_FAILURE() << "the peer did not exit";
        kill(peer_pid_, SIGKILL);
        waitpid(peer_pid_, nullptr, 0);
        peer_pid_ = -1;
    }
    PeerRegion PeerRegister(size_t pages, ULONG flags) {
        const Reply reply = Call(Op::kRegister, 0, pages, flags);
        EXPECT_EQ(reply.status, STATUS_SUCCESS);
        return {reply.value, static_cast<UINT32>(reply.a), reply.b};
    }
    std::vector<uint8_t> PeerMemory(const PeerRegion& region, size_t offset, size_t length) {
        std::vector<uint8_t> bytes;
        EXPECT_EQ(Call(Op::kReadMemory, region.index, offset, length, 0, &bytes).status, STATUS_SUCCESS);
        return bytes;
    }
    Reply PeerPoll(int milliseconds = 5000) { return Call(Op::kPoll, 0, static_cast<uint64_t>(milliseconds)); }
    uint32_t PeerDisconnects() { return Call(Op::kDisconnects).value; }

    // ---- this side ----
    NDK_CQ* CreateCq() {
        Completion done;
        NDK_CQ* cq = nullptr;
        EXPECT_EQ(done.Wait(adapter_->Dispatch->NdkCreateCq(adapter_, 128, &CqEvents::OnNotify, &cq_events_, nullptr,
                                                            &Completion::OnCreate, &done, &cq)),
                  STATUS_SUCCESS);
        return cq != nullptr ? cq : reinterpret_cast<NDK_CQ*>(done.object());
    }
    NDK_QP* CreateQp() {
        Completion done;
        NDK_QP* qp = nullptr;
        EXPECT_EQ(done.Wait(pd_->Dispatch->NdkCreateQp(pd_, cq_, cq_, nullptr, 64, 64, 4, 4, 64, &Completion::OnCreate,
                                                       &done, &qp)),
                  STATUS_SUCCESS);
        return qp != nullptr ? qp : reinterpret_cast<NDK_QP*>(done.object());
    }
    void Connect() {
        Completion created;
        NDK_CONNECTOR* connector = nullptr;
        ASSERT_EQ(
            created.Wait(adapter_->Dispatch->NdkCreateConnector(adapter_, &Completion::OnCreate, &created, &connector)),
            STATUS_SUCCESS);
        connector_ = connector != nullptr ? connector : reinterpret_cast<NDK_CONNECTOR*>(created.object());
        SOCKADDR_IN source = Loopback(0);
        SOCKADDR_IN destination = Loopback(port_);
        Completion connected;
        ASSERT_EQ(connected.Wait(connector_->Dispatch->NdkConnect(
                      connector_, qp_, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
                      reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), 16, 16, nullptr, 0,
                      &Completion::OnRequest, &connected)),
                  STATUS_SUCCESS)
            << SoftNdkGetLastErrorText();
        Completion completed;
        ASSERT_EQ(completed.Wait(connector_->Dispatch->NdkCompleteConnect(
                      connector_, &DisconnectEvents::OnDisconnect, &disconnects_, &Completion::OnRequest, &completed)),
                  STATUS_SUCCESS);
    }
    NDK_SGE LocalSge(size_t offset, ULONG length) {
        NDK_SGE sge{};
        sge.VirtualAddress = buffer_->data() + offset;
        sge.Length = length;
        sge.MemoryRegionToken = mr_->Dispatch->NdkGetLocalTokenFromMr(mr_);
        return sge;
    }
    NDK_RESULT_EX Next() {  // one completion of this side (waits up to 5 s)
        NDK_RESULT_EX result{};
        result.Status = STATUS_IO_TIMEOUT;
        WaitFor([&] { return cq_->Dispatch->NdkGetCqResultsEx(cq_, &result, 1) == 1; });
        return result;
    }
    // A remote refusal of a Write shows on the 1-byte Read behind it (RFC 5040 ordering), flushed with the cause.
    void ExpectWriteRefused(const PeerRegion& region, UINT32 token, UINT64 address, uint32_t cause) {
        const std::vector<uint8_t> before = PeerMemory(region, 0, kPages * PAGE_SIZE);
        NDK_SGE sge = LocalSge(0, 256);
        ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &sge, 1, address, token, 0), STATUS_SUCCESS);
        NDK_SGE probe = LocalSge(PAGE_SIZE, 1);
        ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &probe, 1, region.address, region.token, 0), STATUS_SUCCESS);
        const NDK_RESULT_EX write = Next();
        EXPECT_TRUE(write.Status == STATUS_SUCCESS || write.Status == STATUS_CANCELLED) << std::hex << write.Status;
        const NDK_RESULT_EX read = Next();
        EXPECT_EQ(read.Status, STATUS_CANCELLED);
        EXPECT_EQ(read.ProviderErrorCode, cause) << std::hex << read.ProviderErrorCode;
        EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1 && PeerDisconnects() == 1; }))
            << "the Terminate ends the connection on both sides, once";
        EXPECT_EQ(PeerMemory(region, 0, kPages * PAGE_SIZE), before) << "nothing was placed";
    }

    pid_t peer_pid_ = -1;
    int control_ = -1;
    uint16_t port_ = 0;
    NDK_CQ* cq_ = nullptr;
    NDK_QP* qp_ = nullptr;
    NDK_MR* mr_ = nullptr;
    NDK_CONNECTOR* connector_ = nullptr;
    std::unique_ptr<LockedBuffer> buffer_;
    CqEvents cq_events_;
    DisconnectEvents disconnects_;
};
SOFTNDK_ALL_MODES(RemotePeerTest);

constexpr ULONG kRemoteAll =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

TEST_P(RemotePeerTest, QP_04_20_SendLandsInThePeersReceiveWithItsContextAndLength) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kFill, region.index, 0).status, STATUS_SUCCESS);
    ASSERT_EQ(Call(Op::kReceive, region.index, 512, 256, 0x77).status, STATUS_SUCCESS);
    for (int i = 0; i < 48; ++i) buffer_->data()[i] = static_cast<uint8_t>(0xA0 + i);
    NDK_SGE sge = LocalSge(0, 48);
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, reinterpret_cast<PVOID>(0x5), &sge, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX sent = Next();
    EXPECT_EQ(sent.Status, STATUS_SUCCESS);
    EXPECT_EQ(sent.RequestContext, reinterpret_cast<PVOID>(0x5));
    const Reply received = PeerPoll();
    ASSERT_EQ(received.status, STATUS_SUCCESS) << "no receive completion at the peer";
    EXPECT_EQ(received.value, static_cast<uint32_t>(NdkOperationTypeReceive));
    EXPECT_EQ(static_cast<NTSTATUS>(received.a), STATUS_SUCCESS);
    EXPECT_EQ(received.b, 48u) << "QP-20: BytesTransferred";
    EXPECT_EQ(received.c, 0x77u);
    const std::vector<uint8_t> landed = PeerMemory(region, 512, 64);
    for (int i = 0; i < 48; ++i) EXPECT_EQ(landed[i], 0xA0 + i);
    for (int i = 48; i < 64; ++i) EXPECT_EQ(landed[i], 0) << "nothing beyond the message";
}

TEST_P(RemotePeerTest, QP_16_WriteThenReadMoveBytesAcrossProcesses) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    constexpr ULONG kBytes = 3 * PAGE_SIZE;
    for (ULONG i = 0; i < kBytes; ++i) buffer_->data()[i] = static_cast<uint8_t>(i * 7 + 3);
    NDK_SGE out = LocalSge(0, kBytes);
    ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, region.address + 100, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);
    std::memset(buffer_->data() + kBytes, 0, PAGE_SIZE);
    NDK_SGE back = LocalSge(kBytes, 1000);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &back, 1, region.address + 100, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);  // RFC 5040: the Write is placed before the Read is answered
    EXPECT_EQ(std::memcmp(buffer_->data() + kBytes, buffer_->data(), 1000), 0) << "read back";
    const std::vector<uint8_t> placed = PeerMemory(region, 100, kBytes);
    EXPECT_EQ(std::memcmp(placed.data(), buffer_->data(), kBytes), 0) << "the peer's memory holds the Write";
    EXPECT_EQ(disconnects_.count, 0);
}

TEST_P(RemotePeerTest, QP_15_TOK_06_WriteToAnUnknownTokenIsRefusedAndPlacesNothing) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token ^ 0x00550000u, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, QP_16_WritePastTheRegionsEndIsRefusedAndPlacesNothing) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(region, region.token, region.address + kPages * PAGE_SIZE - 100,
                       engine::TerminateProviderError(1, 1, 0x01));
}

TEST_P(RemotePeerTest, MR_19_TokenOfADeregisteredRegionIsRefused) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    const PeerRegion gone = PeerRegister(1, kRemoteAll);
    ASSERT_EQ(Call(Op::kDeregister, gone.index).status, STATUS_SUCCESS);
    ExpectWriteRefused(region, gone.token, gone.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, QP_16_ReadBeyondTheRegionCompletesWithRemoteResources) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    NDK_SGE sink = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, region.address + kPages * PAGE_SIZE - 8, region.token, 0),
              STATUS_SUCCESS);
    const NDK_RESULT_EX read = Next();
    EXPECT_EQ(read.Status, STATUS_REMOTE_RESOURCES) << std::hex << read.Status;
    EXPECT_EQ(read.ProviderErrorCode, engine::TerminateProviderError(0, 1, 0x01));
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; }));
}

TEST_P(RemotePeerTest, TOK_06_ReadOfARegionWithoutRemoteReadIsAccessViolation) {
    const PeerRegion region = PeerRegister(1, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE);
    NDK_SGE sink = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, region.address, region.token, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX read = Next();
    EXPECT_EQ(read.Status, STATUS_ACCESS_VIOLATION) << std::hex << read.Status;
    EXPECT_EQ(read.ProviderErrorCode, engine::TerminateProviderError(0, 1, 0x02));
}

TEST_P(RemotePeerTest, QP_17_SendLargerThanThePeersReceiveEndsTheConnectionWithItsCause) {
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ASSERT_EQ(Call(Op::kReceive, region.index, 0, 16, 0x31).status, STATUS_SUCCESS);
    NDK_SGE sge = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &sge, 1, 0), STATUS_SUCCESS);
    const Reply receive = PeerPoll();
    ASSERT_EQ(receive.status, STATUS_SUCCESS);
    EXPECT_EQ(receive.c, 0x31u);
    EXPECT_NE(static_cast<NTSTATUS>(receive.a), STATUS_SUCCESS) << "the peer's receive fails";
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; })) << "the peer's Terminate reached us";
    NDK_SGE later = LocalSge(0, 8);
    Next();  // the Send itself: it left before the Terminate came back
    ASSERT_EQ(qp_->Dispatch->NdkSend(qp_, nullptr, &later, 1, 0), STATUS_SUCCESS);
    const NDK_RESULT_EX flushed = Next();
    EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
    EXPECT_EQ(flushed.ProviderErrorCode, engine::TerminateProviderError(1, 2, 0x05))
        << std::hex << flushed.ProviderErrorCode;
}

// A fast-registered region of the peer: written through its token, then retired by our Send with Invalidate. The
// peer's receive says which token it invalidated, and a Write through it afterwards is refused.
TEST_P(RemotePeerTest, FR_18_TOK_10_13_14_SendWithInvalidateRetiresThePeersFastRegisteredToken) {
    const Reply fast = Call(Op::kFastRegister, 0, 2, NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ);
    ASSERT_EQ(fast.status, STATUS_SUCCESS);
    const PeerRegion region{fast.value, static_cast<UINT32>(fast.a), fast.b};
    std::memset(buffer_->data(), 0x3E, 128);
    NDK_SGE out = LocalSge(0, 128);
    ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, region.address + 8, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS);
    NDK_SGE probe = LocalSge(PAGE_SIZE, 1);
    ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &probe, 1, region.address + 8, region.token, 0), STATUS_SUCCESS);
    EXPECT_EQ(Next().Status, STATUS_SUCCESS) << "the fast-registered token works";
    EXPECT_EQ(PeerMemory(region, 8, 128), std::vector<uint8_t>(128, 0x3E));
    const PeerRegion inbox = PeerRegister(1, kRemoteAll);
    ASSERT_EQ(Call(Op::kReceive, inbox.index, 0, 64, 0x42).status, STATUS_SUCCESS);
    NDK_SGE sge = LocalSge(0, 16);
    ASSERT_EQ(qp_->Dispatch->NdkSendAndInvalidate(qp_, nullptr, &sge, 1, 0, region.token), STATUS_SUCCESS);
    EXPECT_EQ(Next().Type, NdkOperationTypeSend) << "TOK-13";
    const Reply received = PeerPoll();
    ASSERT_EQ(received.status, STATUS_SUCCESS);
    EXPECT_EQ(static_cast<NTSTATUS>(received.a), STATUS_SUCCESS);
    EXPECT_EQ(received.value, static_cast<uint32_t>(NdkOperationTypeReceiveAndInvalidate));
    EXPECT_EQ(received.e, region.token) << "the invalidated token";
    const PeerRegion other = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(other, region.token, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

// The peer invalidates its own fast-registered region: the token it gave out no longer works (FR-24, TOK-14).
TEST_P(RemotePeerTest, FR_24_TokenOfALocallyInvalidatedRegionIsRefused) {
    const Reply fast = Call(Op::kFastRegister, 0, 1, NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ);
    ASSERT_EQ(fast.status, STATUS_SUCCESS);
    const PeerRegion region{fast.value, static_cast<UINT32>(fast.a), fast.b};
    ASSERT_EQ(Call(Op::kInvalidate, region.index).status, STATUS_SUCCESS);
    const PeerRegion other = PeerRegister(kPages, kRemoteAll);
    ExpectWriteRefused(other, region.token, region.address, engine::TerminateProviderError(1, 1, 0x00));
}

TEST_P(RemotePeerTest, CM_24_26_27_GracefulDisconnectAcrossProcessesIndicatesOnceEachWay) {
    Completion done;
    const NTSTATUS returned = connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done);
    EXPECT_TRUE(WaitFor([&] { return PeerDisconnects() == 1; })) << "the peer hears of it";
    EXPECT_EQ(Call(Op::kDisconnect).status, STATUS_SUCCESS);
    EXPECT_EQ(done.Wait(returned), STATUS_SUCCESS) << "completes at the peer's FIN (CM-24)";
    usleep(20000);
    EXPECT_EQ(PeerDisconnects(), 1u);
    EXPECT_LE(disconnects_.count, 1) << "at most once (CM-26)";
}

// The peer process dies: its kernel closes the stream (a FIN, or a reset when it had unread bytes). The loss is
// indicated once; our NdkDisconnect then completes and flushes what was posted, in order (CM-25), and a request
// posted after that is flushed too.
TEST_P(RemotePeerTest, CM_25_26_PeerProcessKilledIndicatesOnceAndEverythingIsFlushed) {
    NDK_SGE receive = LocalSge(0, 64);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xD1), &receive, 1), STATUS_SUCCESS);
    ASSERT_EQ(qp_->Dispatch->NdkReceive(qp_, reinterpret_cast<PVOID>(0xD2), &receive, 1), STATUS_SUCCESS);
    kill(peer_pid_, SIGKILL);
    waitpid(peer_pid_, nullptr, 0);
    peer_pid_ = -1;
    EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1; })) << "the lost connection is indicated";
    Completion done;
    const NTSTATUS disconnected =
        done.Wait(connector_->Dispatch->NdkDisconnect(connector_, &Completion::OnRequest, &done));
    EXPECT_TRUE(disconnected == STATUS_SUCCESS || disconnected == STATUS_CONNECTION_INVALID)
        << std::hex << disconnected;
    for (uintptr_t context : {0xD1u, 0xD2u}) {
        const NDK_RESULT_EX flushed = Next();
        EXPECT_EQ(flushed.Status, STATUS_CANCELLED);
        EXPECT_EQ(flushed.RequestContext, reinterpret_cast<PVOID>(context)) << "in posting order";
    }
    NDK_SGE send = LocalSge(0, 8);
    const NTSTATUS posted = qp_->Dispatch->NdkSend(qp_, nullptr, &send, 1, 0);
    if (posted == STATUS_SUCCESS) {
        EXPECT_EQ(Next().Status, STATUS_CANCELLED) << "a request after the loss is flushed";
    }
    usleep(20000);
    EXPECT_EQ(disconnects_.count, 1) << "once (CM-26)";
}

}  // namespace
}  // namespace softndk::test
