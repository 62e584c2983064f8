// SoftNdkStatusName (issue 20 §1): the name of every NTSTATUS softndk's headers define, ndkpi.h and the km
// layer's, so that consumers print `STATUS_CONNECTION_REFUSED (0xC0000236)` as the tools do.
#include <softndk/softndk.h>

#include <cstdint>
#include <iterator>

namespace {

struct StatusName {
    NTSTATUS status;
    const char* name;
};

// Sorted by value; the wait results STATUS_WAIT_0..63 share values with STATUS_SUCCESS and small counts and are
// not named here.
constexpr StatusName kNames[] = {
    {static_cast<NTSTATUS>(0x00000000), "STATUS_SUCCESS"},
    {static_cast<NTSTATUS>(0x00000080), "STATUS_ABANDONED_WAIT_0"},
    {static_cast<NTSTATUS>(0x000000C0), "STATUS_USER_APC"},
    {static_cast<NTSTATUS>(0x00000101), "STATUS_ALERTED"},
    {static_cast<NTSTATUS>(0x00000102), "STATUS_TIMEOUT"},
    {static_cast<NTSTATUS>(0x00000103), "STATUS_PENDING"},
    {static_cast<NTSTATUS>(0x00000105), "STATUS_MORE_ENTRIES"},
    {static_cast<NTSTATUS>(0x80000005), "STATUS_BUFFER_OVERFLOW"},
    {static_cast<NTSTATUS>(0x80000011), "STATUS_DEVICE_BUSY"},
    {static_cast<NTSTATUS>(0x8000001A), "STATUS_NO_MORE_ENTRIES"},
    {static_cast<NTSTATUS>(0xC0000001), "STATUS_UNSUCCESSFUL"},
    {static_cast<NTSTATUS>(0xC0000002), "STATUS_NOT_IMPLEMENTED"},
    {static_cast<NTSTATUS>(0xC0000003), "STATUS_INVALID_INFO_CLASS"},
    {static_cast<NTSTATUS>(0xC0000004), "STATUS_INFO_LENGTH_MISMATCH"},
    {static_cast<NTSTATUS>(0xC0000005), "STATUS_ACCESS_VIOLATION"},
    {static_cast<NTSTATUS>(0xC0000008), "STATUS_INVALID_HANDLE"},
    {static_cast<NTSTATUS>(0xC000000D), "STATUS_INVALID_PARAMETER"},
    {static_cast<NTSTATUS>(0xC000000E), "STATUS_NO_SUCH_DEVICE"},
    {static_cast<NTSTATUS>(0xC0000010), "STATUS_INVALID_DEVICE_REQUEST"},
    {static_cast<NTSTATUS>(0xC0000011), "STATUS_END_OF_FILE"},
    {static_cast<NTSTATUS>(0xC0000016), "STATUS_MORE_PROCESSING_REQUIRED"},
    {static_cast<NTSTATUS>(0xC0000017), "STATUS_NO_MEMORY"},
    {static_cast<NTSTATUS>(0xC0000022), "STATUS_ACCESS_DENIED"},
    {static_cast<NTSTATUS>(0xC0000023), "STATUS_BUFFER_TOO_SMALL"},
    {static_cast<NTSTATUS>(0xC0000030), "STATUS_INVALID_PARAMETER_MIX"},
    {static_cast<NTSTATUS>(0xC0000033), "STATUS_OBJECT_NAME_INVALID"},
    {static_cast<NTSTATUS>(0xC0000034), "STATUS_OBJECT_NAME_NOT_FOUND"},
    {static_cast<NTSTATUS>(0xC0000035), "STATUS_OBJECT_NAME_COLLISION"},
    {static_cast<NTSTATUS>(0xC000003A), "STATUS_OBJECT_PATH_NOT_FOUND"},
    {static_cast<NTSTATUS>(0xC000003E), "STATUS_DATA_ERROR"},
    {static_cast<NTSTATUS>(0xC000003F), "STATUS_CRC_ERROR"},
    {static_cast<NTSTATUS>(0xC0000043), "STATUS_SHARING_VIOLATION"},
    {static_cast<NTSTATUS>(0xC0000056), "STATUS_DELETE_PENDING"},
    {static_cast<NTSTATUS>(0xC0000095), "STATUS_INTEGER_OVERFLOW"},
    {static_cast<NTSTATUS>(0xC000009A), "STATUS_INSUFFICIENT_RESOURCES"},
    {static_cast<NTSTATUS>(0xC00000A1), "STATUS_WORKING_SET_QUOTA"},
    {static_cast<NTSTATUS>(0xC00000A3), "STATUS_DEVICE_NOT_READY"},
    {static_cast<NTSTATUS>(0xC00000B5), "STATUS_IO_TIMEOUT"},
    {static_cast<NTSTATUS>(0xC00000BB), "STATUS_NOT_SUPPORTED"},
    {static_cast<NTSTATUS>(0xC00000C3), "STATUS_INVALID_NETWORK_RESPONSE"},
    {static_cast<NTSTATUS>(0xC00000C4), "STATUS_UNEXPECTED_NETWORK_ERROR"},
    {static_cast<NTSTATUS>(0xC00000E5), "STATUS_INTERNAL_ERROR"},
    {static_cast<NTSTATUS>(0xC0000120), "STATUS_CANCELLED"},
    {static_cast<NTSTATUS>(0xC000013D), "STATUS_REMOTE_RESOURCES"},
    {static_cast<NTSTATUS>(0xC0000141), "STATUS_INVALID_ADDRESS"},
    {static_cast<NTSTATUS>(0xC0000184), "STATUS_INVALID_DEVICE_STATE"},
    {static_cast<NTSTATUS>(0xC0000206), "STATUS_INVALID_BUFFER_SIZE"},
    {static_cast<NTSTATUS>(0xC0000209), "STATUS_TOO_MANY_ADDRESSES"},
    {static_cast<NTSTATUS>(0xC000020A), "STATUS_ADDRESS_ALREADY_EXISTS"},
    {static_cast<NTSTATUS>(0xC000020C), "STATUS_CONNECTION_DISCONNECTED"},
    {static_cast<NTSTATUS>(0xC000020D), "STATUS_CONNECTION_RESET"},
    {static_cast<NTSTATUS>(0xC0000225), "STATUS_NOT_FOUND"},
    {static_cast<NTSTATUS>(0xC000022D), "STATUS_RETRY"},
    {static_cast<NTSTATUS>(0xC0000236), "STATUS_CONNECTION_REFUSED"},
    {static_cast<NTSTATUS>(0xC000023A), "STATUS_CONNECTION_INVALID"},
    {static_cast<NTSTATUS>(0xC000023C), "STATUS_NETWORK_UNREACHABLE"},
    {static_cast<NTSTATUS>(0xC000023D), "STATUS_HOST_UNREACHABLE"},
    {static_cast<NTSTATUS>(0xC0000240), "STATUS_REQUEST_ABORTED"},
    {static_cast<NTSTATUS>(0xC0000241), "STATUS_CONNECTION_ABORTED"},
    {static_cast<NTSTATUS>(0xC000042B), "STATUS_IMPLEMENTATION_LIMIT"},
};

}  // namespace

extern "C" const char* SoftNdkStatusName(NTSTATUS Status) {
    for (const StatusName& entry : kNames)
        if (entry.status == Status) return entry.name;
    return nullptr;
}
