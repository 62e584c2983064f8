// Connection management with the peer in another process (issue 7 §5, third configuration; CM-xx): private
// data and read limits each way through MPA v2, a reject with private data, an active-side reject, and a
// listener closed in the other process. The peer answers as its command line says (--accept, --reject).
#include <string>

#include "peer/remote_peer_fixture.h"

namespace softndk::test {
namespace {

// The peer accepts with IRD 2, ORD 16 and its own private data; we connect with IRD 8, ORD 4 and ours.
class RemoteAcceptTest : public RemotePeerTest {
protected:
    bool ConnectInSetUp() override { return false; }
    std::vector<std::string> PeerArguments() override { return {"--accept", "2,16,from the responder"}; }
};
SOFTNDK_ALL_MODES(RemoteAcceptTest);

TEST_P(RemoteAcceptTest, CM_03_11_EachSideSeesThePeersPrivateDataAndTheEffectiveReadLimits) {
    const char hello[] = "from the initiator";
    ASSERT_EQ(ConnectOnly(8, 4, hello, sizeof(hello)), STATUS_SUCCESS) << SoftNdkGetLastErrorText();
    ULONG inbound = 0, outbound = 0, length = 0;
    ASSERT_EQ(connector_->Dispatch->NdkGetConnectionData(connector_, &inbound, &outbound, nullptr, &length),
              STATUS_SUCCESS);
    const std::string expected = "from the responder";
    EXPECT_EQ(length, expected.size()) << "CM-11 (a): the size of the peer's private data";
    std::string data(length, '\0');
    ASSERT_EQ(connector_->Dispatch->NdkGetConnectionData(connector_, &inbound, &outbound, data.data(), &length),
              STATUS_SUCCESS);
    EXPECT_EQ(data, expected);
    EXPECT_EQ(inbound, 8u) << "CM-03: our inbound limit, at most the peer's outbound 16";
    EXPECT_EQ(outbound, 2u) << "CM-03: our outbound limit lowered to the peer's inbound 2";
    ASSERT_EQ(CompleteConnect(), STATUS_SUCCESS);
    EXPECT_EQ(Call(Op::kAcceptResult, 0, 5000).status, STATUS_SUCCESS);
    std::vector<uint8_t> seen;
    const Reply theirs = Call(Op::kConnectionData, 0, 0, 0, 0, &seen);
    ASSERT_EQ(theirs.status, STATUS_SUCCESS);
    EXPECT_EQ(std::string(seen.begin(), seen.end()), std::string(hello, sizeof(hello)))
        << "the peer saw our private data";
    EXPECT_EQ(theirs.a, 4u) << "its inbound limit at the connect event: our outbound 4";
    EXPECT_EQ(theirs.b, 8u) << "its outbound limit at the connect event: our inbound 8";
    // Two Reads in flight are allowed by the effective outbound limit; the data path works.
    const PeerRegion region = PeerRegister(kPages, kRemoteAll);
    ExpectWritePlaced(region, region.token, region.address, 0, 128, 0x5C);
}

class RemoteRejectTest : public RemotePeerTest {
protected:
    bool ConnectInSetUp() override { return false; }
    std::vector<std::string> PeerArguments() override { return {"--reject", "not today"}; }
};
SOFTNDK_ALL_MODES(RemoteRejectTest);

TEST_P(RemoteRejectTest, CM_09_11_ThePeersRejectRefusesTheConnectWithItsPrivateData) {
    EXPECT_EQ(ConnectOnly(16, 16), STATUS_CONNECTION_REFUSED);
    char buffer[64] = {};
    ULONG length = sizeof(buffer);
    ASSERT_EQ(connector_->Dispatch->NdkGetConnectionData(connector_, nullptr, nullptr, buffer, &length),
              STATUS_SUCCESS);
    EXPECT_EQ(std::string(buffer, length), "not today");
    EXPECT_EQ(Call(Op::kAcceptResult, 0, 100).status, STATUS_SUCCESS) << "NdkReject returned STATUS_SUCCESS";
}

class RemoteConnectTest : public RemotePeerTest {
protected:
    bool ConnectInSetUp() override { return false; }
};
SOFTNDK_ALL_MODES(RemoteConnectTest);

// CM-09: the active side may reject after its NdkConnect completed; the peer's NdkAccept then fails.
TEST_P(RemoteConnectTest, CM_09_AnActiveRejectAbortsThePeersAccept) {
    ASSERT_EQ(ConnectOnly(16, 16), STATUS_SUCCESS);
    EXPECT_EQ(connector_->Dispatch->NdkReject(connector_, nullptr, 0), STATUS_SUCCESS);
    EXPECT_EQ(Call(Op::kAcceptResult, 0, 5000).status, STATUS_CONNECTION_ABORTED);
    EXPECT_EQ(CompleteConnect(), STATUS_CONNECTION_INVALID);
}

TEST_P(RemoteConnectTest, CM_23_AListenerClosedInTheOtherProcessRefusesConnects) {
    ASSERT_EQ(Call(Op::kCloseListener).status, STATUS_SUCCESS);
    EXPECT_EQ(ConnectOnly(16, 16), STATUS_CONNECTION_REFUSED);
}

}  // namespace
}  // namespace softndk::test
