// The protocol between a conformance test and ndk_remote_side, the process that holds side B of a connected pair
// when the suites run with the peer in another process (issue 7 §5, third configuration; SOFTNDK_TEST_REMOTE_SIDE).
// Every NDK call on one of B's objects is forwarded as one message and answered by one; a callback the remote
// provider makes comes back as an event. Objects are named by the remote provider's handle values. Memory is
// one shared arena mapped at the same address in both processes, so SGEs, MDLs and addresses cross unchanged.
// Messages are SOCK_SEQPACKET datagrams: a Header, then the body written by Writer and read back by Reader.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace softndk::test::remote {

enum class Kind : uint32_t { kCall = 1, kReply = 2, kEvent = 3 };

// One entry per NDK dispatch function that can be forwarded.
enum class Fn : uint32_t {
    kOpenAdapter = 1,  // body: the SOFTNDK_ADAPTER_CONFIG bytes; reply: status, adapter handle
    kCloseAdapter,
    kQueryAdapterInfo,
    kCreateCq,
    kCreatePd,
    kCreateSharedEndpoint,
    kCreateConnector,
    kCreateListener,
    kBuildLam,
    kReleaseLam,
    kClose,  // any object but the adapter
    kResizeCq,
    kArmCq,
    kGetCqResultsEx,
    kCreateMr,
    kCreateMw,
    kCreateSrq,
    kCreateQp,
    kCreateQpWithSrq,
    kGetPrivilegedToken,
    kRegisterMr,
    kDeregisterMr,
    kInitializeFastRegisterMr,
    kGetRemoteTokenFromMr,
    kGetLocalTokenFromMr,
    kGetRemoteTokenFromMw,
    kModifySrq,
    kSrqReceive,
    kFlush,
    kSend,
    kSendAndInvalidate,
    kReceive,
    kBind,
    kFastRegister,
    kInvalidate,
    kRead,
    kWrite,
    kConnect,
    kConnectWithSharedEndpoint,
    kCompleteConnect,
    kAccept,
    kReject,
    kGetConnectionData,
    kConnectorLocalAddress,
    kConnectorPeerAddress,
    kDisconnect,
    kListen,
    kListenerLocalAddress,
    kControlConnectEvents,
    kSharedEndpointLocalAddress,
    kCompleteConnectEx,
    kAcceptEx,
};

// What a callback id names, so the test side knows how to call it. An event's body: id, status, handle.
enum class Callback : uint64_t {
    kCreate = 1,    // NDK_FN_CREATE_COMPLETION; the handle is the new object
    kRequest,       // NDK_FN_REQUEST_COMPLETION
    kClose,         // NDK_FN_CLOSE_COMPLETION
    kCqNotify,      // NDK_FN_CQ_NOTIFICATION_CALLBACK
    kSrqNotify,     // NDK_FN_SRQ_NOTIFICATION_CALLBACK
    kConnect,       // NDK_FN_CONNECT_EVENT_CALLBACK; the handle is the incoming connector
    kDisconnect,    // NDK_FN_DISCONNECT_EVENT_CALLBACK
    kDisconnectEx,  // NDK_FN_DISCONNECT_EVENT_CALLBACK_EX; the status word is the reason
};

struct Header {
    Kind kind;
    Fn fn;
    uint64_t call;  // matches a reply to its call; 0 for events
};

inline constexpr size_t kMaxMessage = 256 * 1024;

class Writer {
public:
    Writer& U64(uint64_t value) {
        Raw(&value, sizeof(value));
        return *this;
    }
    Writer& Bytes(const void* data, size_t length) {
        U64(data == nullptr ? ~uint64_t{0} : length);  // ~0: a NULL pointer, distinct from an empty buffer
        if (data != nullptr) Raw(data, length);
        return *this;
    }
    template <class T>
    Writer& Struct(const T* value) {
        return Bytes(value, value == nullptr ? 0 : sizeof(T));
    }
    const std::vector<uint8_t>& bytes() const { return bytes_; }
    void Raw(const void* data, size_t length) {
        if (length == 0) return;
        const size_t at = bytes_.size();
        bytes_.resize(at + length);  // not insert(): GCC 12 at -O2 warns of a NULL memmove in it (-Wnonnull)
        std::memcpy(bytes_.data() + at, data, length);
    }

private:
    std::vector<uint8_t> bytes_;
};

class Reader {
public:
    Reader(const uint8_t* data, size_t length) : data_(data), length_(length) {}
    uint64_t U64() {
        uint64_t value = 0;
        if (offset_ + sizeof(value) > length_) {
            ok_ = false;
            return 0;
        }
        std::memcpy(&value, data_ + offset_, sizeof(value));
        offset_ += sizeof(value);
        return value;
    }
    // A buffer written by Writer::Bytes; *null says it was a NULL pointer.
    std::vector<uint8_t> Bytes(bool* null = nullptr) {
        const uint64_t length = U64();
        if (null != nullptr) *null = length == ~uint64_t{0};
        if (length == ~uint64_t{0}) return {};
        if (length > length_ - offset_) {
            ok_ = false;
            return {};
        }
        std::vector<uint8_t> out(data_ + offset_, data_ + offset_ + length);
        offset_ += length;
        return out;
    }
    bool ok() const { return ok_; }

private:
    const uint8_t* data_;
    size_t length_;
    size_t offset_ = 0;
    bool ok_ = true;
};

// Command line of ndk_remote_side: --control-fd N --arena-fd N --arena-address HEX --arena-bytes N.

}  // namespace softndk::test::remote
