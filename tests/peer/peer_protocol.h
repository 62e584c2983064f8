// The control channel between a test and ndk_test_peer (issue 7 §5, the suites' third configuration: the peer in
// another process). One fixed-size request, one fixed-size reply (+ bytes for kReadMemory), over a
// SOCK_SEQPACKET socketpair. The NDK connection itself is iWARP/TCP between the two processes.
#pragma once

#include <cstdint>

namespace softndk::peer {

enum class Op : uint32_t {
    kRegister = 1,     // a = pages, b = NDK_MR_FLAG_*: value = MR index, a = remote token, b = address, c = local token
    kDeregister = 2,   // mr
    kFill = 3,         // mr, a = byte
    kReadMemory = 4,   // mr, a = offset, b = length (≤ kMaxPayload): the bytes follow the reply
    kReceive = 5,      // mr, a = offset, b = length, c = request context
    kPoll = 6,         // a = timeout ms: status STATUS_IO_TIMEOUT, or value = Type, a = Status, b = BytesTransferred,
                       // c = RequestContext, d = ProviderErrorCode, e = TypeSpecificCompletionOutput
    kDisconnects = 7,  // value = disconnect events so far
    kDisconnect = 8,   // NdkDisconnect, waited for
    kExit = 9,
    kFastRegister = 10,      // a = pages, b = NDK_OP_FLAG_ALLOW_*: a fast-register MR over fresh memory, registered at
                             // its own address and waited for; value = MR index, a = remote token, b = address
    kInvalidate = 11,        // mr: NdkInvalidate of a fast-registered MR, waited for
    kReregister = 12,        // mr, a = NDK_MR_FLAG_*: deregister, then register the same MR again; a = remote token
    kBind = 13,              // mr, a = offset, b = length, c = NDK_OP_FLAG_ALLOW_*: a new MW bound there, waited for;
                             // value = MW index, a = remote token, b = address
    kInvalidateWindow = 14,  // mr = MW index: NdkInvalidate of the window, waited for
    kCloseConnection = 15,   // close the connector and the QP at once, without NdkDisconnect
    kConnectionData = 16,    // what NdkGetConnectionData showed on the incoming connector before the accept or
                             // reject: value = private data length (the bytes follow), a = inbound, b = outbound
    kAcceptResult = 17,      // a = timeout ms: the NdkAccept's completion status (STATUS_IO_TIMEOUT if none yet)
    kCloseListener = 18,     // close the listener (CM-23: later connects are refused)
};

// kRegister's c: register in the peer's second PD (a token the connection's PD does not own).
inline constexpr uint64_t kInSecondPd = 1;

struct Request {
    Op op;
    uint32_t mr;
    uint64_t a, b, c;
};

struct Reply {
    int32_t status;  // an NTSTATUS
    uint32_t value;
    uint64_t a, b, c, d, e;
};

// Peer command line beyond --control-fd and --mode (fault injection in the peer's adapter):
//   --fault FUNCTION:NTH:async|inline   the NTH call of FUNCTION fails with STATUS_INSUFFICIENT_RESOURCES
//   --drop-after-fpdus N                 its outbound stream is reset after N FPDUs
//   --corrupt-byte N --mpa-crc           flip outbound byte N, with CRC32c asked for
//   --accept IRD,ORD[,TEXT]              NdkAccept with these read limits and private data (default 16,16)
//   --reject TEXT                        NdkReject the incoming connection with this private data

// First message from the peer, unasked: status, value = the port it listens on (127.0.0.1).
inline constexpr size_t kMaxPayload = 64 * 1024;

}  // namespace softndk::peer
