#include "common/last_error.h"

#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <softndk/wdm.h>

namespace softndk {
namespace {
thread_local char t_last_error[512];
bool LogEnabled() {
    static const bool echo = std::getenv("SOFTNDK_LOG") != nullptr;
    return echo;
}
bool Verbose() {  // read on each error (an error path): a test may set it in a child process
    const char* value = std::getenv("SOFTNDK_VERBOSE");
    return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

// "CM-14", "AMB-27", "CB-15…19", alone or listed with ',', '/', ';' or "and": the text of a requirement-id aside.
bool IsIdList(std::string_view text) {
    size_t i = 0;
    bool any = false;
    auto upper = [&](size_t at) { return at < text.size() && text[at] >= 'A' && text[at] <= 'Z'; };
    auto digit = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '9'; };
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '/' || text[i] == ';')) ++i;
        if (text.substr(i, 4) == "and ") {
            i += 4;
            continue;
        }
        if (i >= text.size()) break;
        const size_t start = i;
        while (upper(i)) ++i;
        if (i - start < 2 || i - start > 5 || i >= text.size() || text[i] != '-' || !digit(i + 1)) return false;
        ++i;
        while (digit(i)) ++i;
        if (text.substr(i, 3) == "\xE2\x80\xA6") {  // a range, CB-15…19
            i += 3;
            while (digit(i)) ++i;
        }
        any = true;
    }
    return any;
}

// User-facing texts name the problem and the remedy; the requirement ids behind them (" (CM-14)") are for
// SOFTNDK_VERBOSE=1 and the logs.
void DropIdAsides(char* text) {
    std::string out;
    const std::string_view in(text);
    size_t i = 0;
    while (i < in.size()) {
        const size_t open = in.find(" (", i);
        if (open == std::string_view::npos) break;
        const size_t close = in.find(')', open + 2);
        if (close == std::string_view::npos) break;
        out.append(in.substr(i, open - i));
        if (!IsIdList(in.substr(open + 2, close - open - 2))) out.append(in.substr(open, close + 1 - open));
        i = close + 1;
    }
    out.append(in.substr(std::min(i, in.size())));
    std::snprintf(text, std::strlen(text) + 1, "%s", out.c_str());
}
}  // namespace

void SetLastErrorText(const char* format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(t_last_error, sizeof(t_last_error), format, args);
    va_end(args);
    if (LogEnabled()) std::fprintf(stderr, "softndk: %s\n", t_last_error);  // the log keeps the ids
    if (!Verbose()) DropIdAsides(t_last_error);
}

void LogText(const char* format, ...) {
    if (!LogEnabled()) return;
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    std::fprintf(stderr, "softndk: %s\n", text);
}

void ClearLastErrorText() {
    t_last_error[0] = '\0';
}

}  // namespace softndk

extern "C" const char* SoftNdkGetLastErrorText(void) {
    return softndk::t_last_error;
}

extern "C" VOID SoftNdkClearLastErrorText(void) {
    softndk::ClearLastErrorText();
}
