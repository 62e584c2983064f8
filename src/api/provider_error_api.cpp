// SoftNdkFormatProviderError: a completion's ProviderErrorCode as text (CQ-14). The codes are
// engine::TerminateProviderError's: bit 16 set, then the RFC 5040 layer, error type and code.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>

#include "api/async_request.h"
#include "wire/iwarp_wire.h"

extern "C" NTSTATUS SoftNdkFormatProviderError(ULONG ProviderErrorCode, CHAR* Buffer, ULONG Length) {
    if (Buffer == nullptr || Length == 0)
        return softndk::api::InvalidParameter("SoftNdkFormatProviderError: NULL Buffer or Length 0");
    std::string text;
    if (ProviderErrorCode == 0) {
        text = "none";
    } else if ((ProviderErrorCode & ~0x1FFFFu) == 0 && (ProviderErrorCode & 0x10000u) != 0 &&
               ((ProviderErrorCode >> 12) & 0x0F) <= 2) {  // RDMAP, DDP or LLP
        softndk::wire::TerminateCause cause;
        cause.layer = static_cast<softndk::wire::ErrorLayer>((ProviderErrorCode >> 12) & 0x0F);
        cause.etype = static_cast<uint8_t>((ProviderErrorCode >> 8) & 0x0F);
        cause.code = static_cast<uint8_t>(ProviderErrorCode & 0xFF);
        text = softndk::wire::FormatTerminateCause(cause);
    } else {
        char buffer[64];
        std::snprintf(buffer, sizeof(buffer), "provider error 0x%x (not a terminate cause)",
                      static_cast<unsigned>(ProviderErrorCode));
        text = buffer;
    }
    const size_t copied = std::min<size_t>(text.size(), Length - 1);
    std::memcpy(Buffer, text.data(), copied);
    Buffer[copied] = 0;
    return copied == text.size() ? STATUS_SUCCESS : STATUS_BUFFER_OVERFLOW;
}
