// The fixture of the data-path suites with the peer in another process (issue 7 §5, third configuration): this
// process is the initiator; ndk_test_peer, started per test, is the responder with its own adapter, in the same
// completion mode. The connection is iWARP/TCP, chosen by the default transport (the listener is in another
// process). The peer is driven over a control socket (tests/peer/peer_protocol.h): what it registered, received
// and holds in memory is checked there, so nothing is shared between the two sides but the wire.
#pragma once

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
        if (ConnectInSetUp()) {
            ASSERT_NO_FATAL_FAILURE(Connect());
        }
    }
    // What the peer's adapter is started with beyond its completion mode (fault options, peer_protocol.h).
    virtual std::vector<std::string> PeerArguments() { return {}; }
    virtual bool ConnectInSetUp() { return true; }

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
        std::vector<std::string> arguments{"ndk_test_peer", "--control-fd", std::to_string(pair[1]), "--mode",
                                           std::to_string(static_cast<int>(Mode()))};
        for (std::string& extra : PeerArguments()) arguments.push_back(std::move(extra));
        std::vector<char*> argv;
        for (std::string& argument : arguments) argv.push_back(argument.data());
        argv.push_back(nullptr);
        peer_pid_ = fork();
        ASSERT_GE(peer_pid_, 0);
        if (peer_pid_ == 0) {
            ::close(pair[0]);
            execv(SOFTNDK_TEST_PEER, argv.data());
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
        Ask(op, mr, a, b, c);
        return Answer(payload);
    }
    // A call in two halves, so that this side can post while the peer works.
    void Ask(Op op, uint32_t mr = 0, uint64_t a = 0, uint64_t b = 0, uint64_t c = 0) {
        Request request{op, mr, a, b, c};
        EXPECT_EQ(::send(control_, &request, sizeof(request), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(request)));
    }
    Reply Answer(std::vector<uint8_t>* payload = nullptr) {
        Reply reply{};
        reply.status = STATUS_INTERNAL_ERROR;
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
    PeerRegion PeerRegister(size_t pages, ULONG flags, uint64_t where = 0) {
        const Reply reply = Call(Op::kRegister, 0, pages, flags, where);
        EXPECT_EQ(reply.status, STATUS_SUCCESS);
        return {reply.value, static_cast<UINT32>(reply.a), reply.b};
    }
    // A window of the peer over `region` [offset, offset + length); `index` is the MW's.
    PeerRegion PeerBind(const PeerRegion& region, size_t offset, size_t length, ULONG flags) {
        const Reply reply = Call(Op::kBind, region.index, offset, length, flags);
        EXPECT_EQ(reply.status, STATUS_SUCCESS) << std::hex << reply.status;
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
    // NdkConnect to the peer with these read limits and private data, waited for; NdkCompleteConnect is left.
    NTSTATUS ConnectOnly(ULONG inbound, ULONG outbound, const void* data = nullptr, ULONG length = 0) {
        Completion created;
        NDK_CONNECTOR* connector = nullptr;
        EXPECT_EQ(
            created.Wait(adapter_->Dispatch->NdkCreateConnector(adapter_, &Completion::OnCreate, &created, &connector)),
            STATUS_SUCCESS);
        connector_ = connector != nullptr ? connector : reinterpret_cast<NDK_CONNECTOR*>(created.object());
        SOCKADDR_IN source = Loopback(0);
        SOCKADDR_IN destination = Loopback(port_);
        Completion connected;
        return connected.Wait(connector_->Dispatch->NdkConnect(
            connector_, qp_, reinterpret_cast<PSOCKADDR>(&source), sizeof(source),
            reinterpret_cast<PSOCKADDR>(&destination), sizeof(destination), inbound, outbound, const_cast<void*>(data),
            length, &Completion::OnRequest, &connected));
    }
    NTSTATUS CompleteConnect() {
        Completion completed;
        return completed.Wait(connector_->Dispatch->NdkCompleteConnect(
            connector_, &DisconnectEvents::OnDisconnect, &disconnects_, &Completion::OnRequest, &completed));
    }
    void Connect() {
        ASSERT_EQ(ConnectOnly(16, 16), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
        ASSERT_EQ(CompleteConnect(), STATUS_SUCCESS);
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

    // A Read the peer refuses: its status and cause, nothing read, and the Terminate ends the connection.
    void ExpectReadRefused(UINT32 token, UINT64 address, ULONG length, NTSTATUS status, uint32_t cause) {
        std::memset(buffer_->data(), 0x5A, length);
        NDK_SGE sink = LocalSge(0, length);
        ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &sink, 1, address, token, 0), STATUS_SUCCESS);
        const NDK_RESULT_EX read = Next();
        EXPECT_EQ(read.Status, status) << std::hex << read.Status;
        EXPECT_EQ(read.ProviderErrorCode, cause) << std::hex << read.ProviderErrorCode;
        for (ULONG i = 0; i < length; ++i) ASSERT_EQ(buffer_->data()[i], 0x5A) << "nothing was read, byte " << i;
        EXPECT_TRUE(WaitFor([&] { return disconnects_.count == 1 && PeerDisconnects() == 1; }))
            << "the Terminate ends the connection on both sides, once";
    }
    // A Write the peer accepts, seen in its memory: `length` bytes of `seed` at `offset` of `region`. The Read
    // behind it goes to (token, address), or to `probe_with` when the target cannot be read.
    void ExpectWritePlaced(const PeerRegion& region, UINT32 token, UINT64 address, size_t offset, ULONG length,
                           uint8_t seed, const PeerRegion* probe_with = nullptr) {
        for (ULONG i = 0; i < length; ++i) buffer_->data()[i] = static_cast<uint8_t>(seed + i);
        NDK_SGE out = LocalSge(0, length);
        ASSERT_EQ(qp_->Dispatch->NdkWrite(qp_, nullptr, &out, 1, address, token, 0), STATUS_SUCCESS);
        EXPECT_EQ(Next().Status, STATUS_SUCCESS);
        NDK_SGE probe = LocalSge(PAGE_SIZE, 1);  // RFC 5040: placed before the Read behind it is answered
        ASSERT_EQ(qp_->Dispatch->NdkRead(qp_, nullptr, &probe, 1, probe_with != nullptr ? probe_with->address : address,
                                         probe_with != nullptr ? probe_with->token : token, 0),
                  STATUS_SUCCESS);
        ASSERT_EQ(Next().Status, STATUS_SUCCESS);
        const std::vector<uint8_t> placed = PeerMemory(region, offset, length);
        ASSERT_EQ(placed.size(), length);
        EXPECT_EQ(std::memcmp(placed.data(), buffer_->data(), length), 0) << "the Write is in the peer's memory";
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

constexpr ULONG kRemoteAll =
    NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;

}  // namespace softndk::test
