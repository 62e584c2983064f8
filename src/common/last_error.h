// Thread-local text describing the last failure, read through SoftNdkGetLastErrorText().
#pragma once

namespace softndk {

// printf-style; also echoed to stderr when SOFTNDK_LOG is set.
void SetLastErrorText(const char* format, ...) __attribute__((format(printf, 1, 2)));
void ClearLastErrorText();
// printf-style, to stderr only when SOFTNDK_LOG is set; the last-error text stays as it is. For what happens on
// a thread that is not the consumer's (a peer's access refused on the receive path).
void LogText(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace softndk
