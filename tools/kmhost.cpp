// softndk-kmhost: loads kernel-style NDK consumers built as shared objects (one or several, in one process),
// calls each DriverEntry with a DRIVER_OBJECT and a registry path, runs them until asked to stop, calls each
// DriverUnload (last loaded first) and reports leaks
// (issue 9 §2). Exit status: 0 clean, 2 usage (a bad flag or value, as every tool), 3 DriverEntry failed,
// 4 leaks, 5 Verifier violations (log mode; abort mode stops at the first), 6 the driver cannot be loaded,
// 128 + N ended by signal N (130 SIGINT, 143 SIGTERM) with a report of where the driver was.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ntddk.h>
#include <softndk_km.h>

#include "ndk_args.h"
#include "ndk_route.h"

namespace {

constexpr const char* kUsage =
    "usage: softndk-kmhost [options] DRIVER.so [DRIVER.so ...]\n"
    "  --interface IFINDEX=ADDRESS[,ADDRESS...]  an NDK interface the driver sees (repeatable): IfIndex 1-65535,\n"
    "                                    up to 8 IPv4/IPv6 addresses or host names; its LUID and alias\n"
    "                                    (\"softndk IFINDEX\") follow from the IfIndex. Several opens of one\n"
    "                                    interface are one device (default: interface 1 = 127.0.0.1, ::1)\n"
    "  --completion inline|pend|random   completion mode of every interface (default inline)\n"
    "  --seed N                          random completion / token seed, 0-4294967295 (default 0)\n"
    "  --fault SPEC                      Function[:nth=N|:p=F][:async][:status=0x..] (repeatable; default none)\n"
    "  --verifier abort|log|off          what a Verifier violation does (default abort)\n"
    "  --stop-when-idle                  stop once DriverEntry returned and no work item, timer or\n"
    "                                    DPC is pending for 200 ms (default: off)\n"
    "  --seconds S                       stop after S seconds, 0-86400 (default: SIGINT / SIGTERM)\n"
    "  --registry-path PATH              the RegistryPath DriverEntry receives\n"
    "                                    (default \\Registry\\Machine\\System\\CurrentControlSet\\Services\\NAME)\n"
    "  --parameter NAME=VALUE            a value under RegistryPath\\Parameters (ZwQueryValueKey) of each\n"
    "                                    driver: REG_DWORD when VALUE is a number (decimal or 0x…), else\n"
    "                                    REG_SZ (repeatable)\n"
    "  Several drivers run in one process (their connections take the in-process path): DriverEntry in the\n"
    "  order given, DriverUnload in the reverse order; --registry-path then cannot be given.\n"
    "  -h, --help                        this text\n"
    "  SIGINT/SIGTERM: DriverUnload, then the leak report; inside DriverEntry or DriverUnload, or a second\n"
    "  signal: a report of where the driver is, then exit 128 + the signal\n";

[[noreturn]] void BadUsage(const char* format, const char* detail = "") {
    std::fprintf(stderr, "softndk-kmhost: ");
    std::fprintf(stderr, format, detail);
    std::fprintf(stderr, "; see softndk-kmhost --help\n");
    std::exit(2);
}

// ---- where the driver is, for a signal's report (issue 19 §3) ----
enum class Phase { kLoading, kDriverEntry, kRunning, kDriverUnload, kReporting };
std::atomic<Phase> g_phase{Phase::kLoading};
std::atomic<bool> g_stop{false};
std::string g_driver_name;                 // written before DriverEntry, read only after
std::atomic<int64_t> g_phase_since_ns{0};  // steady_clock, read by the signal thread

int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void EnterPhase(Phase phase) {
    g_phase_since_ns.store(NowNs());
    g_phase.store(phase);
}

const char* PhaseText(Phase phase) {
    switch (phase) {
        case Phase::kLoading:
            return "while loading the driver";
        case Phase::kDriverEntry:
            return "inside DriverEntry, which has not returned";
        case Phase::kRunning:
            return "while the driver runs";
        case Phase::kDriverUnload:
            return "inside DriverUnload, which has not returned";
        case Phase::kReporting:
            return "while reporting leaks";
    }
    return "";
}

// SIGINT and SIGTERM are blocked in every thread and taken here with sigwait, so the report may print and
// query the kernel layer. While the driver runs, the first signal asks for DriverUnload (a clean stop); inside
// DriverEntry or DriverUnload, or at a second signal, the host reports where the driver is and what it holds,
// and ends with 128 + the signal: a driver stuck in a wait cannot keep the host alive.
void SignalThread(sigset_t signals) {
    for (int count = 1;; ++count) {
        int signal_number = 0;
        if (sigwait(&signals, &signal_number) != 0) continue;
        const Phase phase = g_phase.load();
        if (phase == Phase::kRunning && count == 1) {
            std::fprintf(stderr, "softndk-kmhost: %s: calling DriverUnload (a second signal ends the host at once)\n",
                         strsignal(signal_number));
            g_stop.store(true);
            continue;
        }
        const double seconds = static_cast<double>(NowNs() - g_phase_since_ns.load()) / 1e9;
        std::fprintf(stderr, "softndk-kmhost: %s %s (%s, for %.1f s); ending the host without DriverUnload\n",
                     strsignal(signal_number), PhaseText(phase), g_driver_name.c_str(), seconds);
        // What the driver holds: the leak report, given 2 s (a stuck thread may hold a lock it needs).
        std::atomic<bool> reported{false};
        std::thread([&reported] {
            SoftNdkKmReportLeaks();
            reported.store(true);
        }).detach();
        for (int i = 0; i < 200 && !reported.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!reported.load()) std::fprintf(stderr, "softndk-kmhost: (the leak report did not finish in 2 s)\n");
        std::fflush(stderr);
        _exit(128 + signal_number);
    }
}

// --interface IFINDEX=ADDRESS[,ADDRESS...]
struct InterfaceSpec {
    NET_IFINDEX index = 0;
    std::vector<SOCKADDR_INET> addresses;
};

InterfaceSpec ParseInterface(const std::string& text) {
    InterfaceSpec spec;
    const size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 >= text.size())
        BadUsage("--interface: \"%s\" is not IFINDEX=ADDRESS[,ADDRESS...]", text.c_str());
    spec.index = static_cast<NET_IFINDEX>(
        ndk_parse_count("softndk-kmhost", "--interface", text.substr(0, equals).c_str(), 1, 65535, NULL));
    size_t position = equals + 1;
    while (position != std::string::npos) {
        const size_t comma = text.find(',', position);
        const std::string item =
            text.substr(position, comma == std::string::npos ? std::string::npos : comma - position);
        SOCKADDR_INET address;
        char error[256];
        if (ndk_resolve(item.c_str(), 0, AF_UNSPEC, &address, error, sizeof(error)) == 0)
            BadUsage("--interface: %s", error);
        if (spec.addresses.size() == SOFTNDK_MAX_LOCAL_ADDRESSES)
            BadUsage("--interface: more than 8 addresses for IfIndex %s", text.substr(0, equals).c_str());
        spec.addresses.push_back(address);
        position = comma == std::string::npos ? std::string::npos : comma + 1;
    }
    return spec;
}

std::wstring Widen(const std::string& text) {
    return std::wstring(text.begin(), text.end());
}

// --parameter NAME=VALUE: a number becomes REG_DWORD, anything else REG_SZ.
bool SetParameters(const std::wstring& key, const std::vector<std::string>& parameters) {
    for (const std::string& parameter : parameters) {
        const size_t equals = parameter.find('=');
        const std::wstring name = Widen(parameter.substr(0, equals));
        const std::string text = parameter.substr(equals + 1);
        char* end = nullptr;
        const unsigned long number = std::strtoul(text.c_str(), &end, 0);
        NTSTATUS status;
        if (!text.empty() && *end == '\0' && number <= 0xFFFFFFFFul &&
            std::isdigit(static_cast<unsigned char>(text[0]))) {
            const ULONG dword = static_cast<ULONG>(number);
            status = SoftNdkKmSetRegistryValue(key.c_str(), name.c_str(), REG_DWORD, &dword, sizeof(dword));
        } else {
            const std::wstring wide = Widen(text);
            status = SoftNdkKmSetRegistryValue(key.c_str(), name.c_str(), REG_SZ, wide.c_str(),
                                               static_cast<ULONG>((wide.size() + 1) * sizeof(WCHAR)));
        }
        if (!NT_SUCCESS(status)) return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    // Before any thread exists, so that every thread inherits it: signals go to SignalThread only.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::thread(SignalThread, signals).detach();

    SOFTNDK_ADAPTER_CONFIG config;
    SoftNdkInitAdapterConfig(&config);
    std::vector<std::string> driver_paths;
    std::string registry_path;
    std::vector<std::string> parameters;
    std::map<NET_IFINDEX, InterfaceSpec> interfaces;
    bool stop_when_idle = false;
    double seconds = -1;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) BadUsage("%s needs a value", arg.c_str());
            return argv[++i];
        };
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (arg == "--completion") {
            const std::string mode = value();
            if (mode == "inline") {
                config.CompletionMode = SOFTNDK_COMPLETION_INLINE;
            } else if (mode == "pend") {
                config.CompletionMode = SOFTNDK_COMPLETION_PEND;
            } else if (mode == "random") {
                config.CompletionMode = SOFTNDK_COMPLETION_RANDOM;
            } else {
                BadUsage("--completion: \"%s\" is not inline, pend or random", mode.c_str());
            }
        } else if (arg == "--seed") {
            config.RandomSeed = static_cast<ULONG>(
                ndk_parse_count("softndk-kmhost", "--seed", value().c_str(), 0, 0xFFFFFFFFull, NULL));
        } else if (arg == "--fault") {
            const std::string spec = value();
            if (!NT_SUCCESS(SoftNdkKmParseFaults(spec.c_str(), &config)))
                BadUsage("--fault: \"%s\" is not Function[:nth=N|:p=F][:async][:status=0x..]", spec.c_str());
        } else if (arg == "--verifier") {
            const std::string mode = value();
            if (mode != "off" && mode != "log" && mode != "abort")
                BadUsage("--verifier: \"%s\" is not abort, log or off", mode.c_str());
            SoftNdkKmSetVerifierMode(mode == "off"   ? SOFTNDK_VERIFIER_OFF
                                     : mode == "log" ? SOFTNDK_VERIFIER_LOG
                                                     : SOFTNDK_VERIFIER_ABORT);
        } else if (arg == "--stop-when-idle") {
            stop_when_idle = true;
        } else if (arg == "--seconds") {
            seconds = ndk_parse_seconds("softndk-kmhost", "--seconds", value().c_str(), 0, 86400, NULL);
        } else if (arg == "--registry-path") {
            registry_path = value();
        } else if (arg == "--parameter") {
            const std::string parameter = value();
            if (parameter.find('=') == std::string::npos || parameter[0] == '=')
                BadUsage("--parameter: \"%s\" is not NAME=VALUE", parameter.c_str());
            parameters.push_back(parameter);
        } else if (arg == "--interface") {
            InterfaceSpec spec = ParseInterface(value());
            if (interfaces.count(spec.index) != 0)
                BadUsage("--interface: IfIndex %s is given twice", std::to_string(spec.index).c_str());
            interfaces[spec.index] = spec;
        } else if (!arg.empty() && arg[0] == '-') {
            BadUsage("unknown flag %s", arg.c_str());
        } else {
            driver_paths.push_back(arg);
        }
    }
    if (driver_paths.empty()) BadUsage("no DRIVER.so given%s");
    if (driver_paths.size() > 1 && !registry_path.empty())
        BadUsage("--registry-path names one driver's key; %s drivers were given",
                 std::to_string(driver_paths.size()).c_str());
    if (interfaces.empty()) interfaces[1] = InterfaceSpec{1, {}};  // the default: 127.0.0.1 and ::1
    for (const auto& [index, spec] : interfaces) {
        SOFTNDK_ADAPTER_CONFIG interface_config = config;
        if (!spec.addresses.empty()) {
            interface_config.LocalAddressCount = static_cast<ULONG>(spec.addresses.size());
            for (size_t a = 0; a < spec.addresses.size(); ++a) interface_config.LocalAddresses[a] = spec.addresses[a];
            interface_config.HostAddresses = 0;  // this interface owns exactly what --interface gives it
        }
        const NTSTATUS registered = SoftNdkKmRegisterInterface(index, &interface_config);
        if (!NT_SUCCESS(registered))
            BadUsage("--interface: IfIndex %s cannot be registered", std::to_string(index).c_str());
    }

    // Each driver: loaded, its parameters set under its own key, DriverEntry called, in the order given; unloaded
    // in the reverse order. Drivers in one host share the process, so their connections take the in-process path.
    struct LoadedDriver {
        void* module = nullptr;
        std::string name;
        std::wstring wide_registry, wide_name;
        UNICODE_STRING registry{};
        DRIVER_EXTENSION extension{};
        DRIVER_OBJECT object{};
    };
    std::vector<std::unique_ptr<LoadedDriver>> drivers;
    for (const std::string& driver_path : driver_paths) {
        auto driver = std::make_unique<LoadedDriver>();
        driver->module = dlopen(driver_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (driver->module == nullptr) {
            std::fprintf(stderr, "softndk-kmhost: cannot load %s: %s\n", driver_path.c_str(), dlerror());
            return 6;
        }
        auto* entry = reinterpret_cast<PDRIVER_INITIALIZE>(dlsym(driver->module, "DriverEntry"));
        if (entry == nullptr) {
            std::fprintf(stderr, "softndk-kmhost: %s has no extern \"C\" DriverEntry\n", driver_path.c_str());
            return 6;
        }
        std::string name = driver_path.substr(driver_path.find_last_of('/') + 1);
        driver->name = name.substr(0, name.find('.'));
        // One driver object per module: a module given twice would be entered twice with one set of globals, and
        // two paths with one name would share a registry key and device names.
        for (const auto& loaded : drivers) {
            if (loaded->module == driver->module || loaded->name == driver->name)
                BadUsage("a driver is given twice (%s): each runs once per host", driver->name.c_str());
        }
        const std::string key = registry_path.empty()
                                    ? "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\" + driver->name
                                    : registry_path;
        driver->wide_registry = Widen(key);
        driver->wide_name = Widen("\\Driver\\" + driver->name);
        if (!SetParameters(driver->wide_registry + L"\\Parameters", parameters))
            BadUsage("--parameter: the registry refused a value%s");
        RtlInitUnicodeString(&driver->registry, driver->wide_registry.c_str());
        driver->object.Type = 4;
        driver->object.Size = sizeof(driver->object);
        driver->object.DriverExtension = &driver->extension;
        driver->extension.DriverObject = &driver->object;
        RtlInitUnicodeString(&driver->object.DriverName, driver->wide_name.c_str());
        RtlInitUnicodeString(&driver->extension.ServiceKeyName, driver->wide_name.c_str() + 8);
        driver->object.DriverInit = entry;
        drivers.push_back(std::move(driver));
    }
    for (const auto& driver : drivers) g_driver_name += (g_driver_name.empty() ? "" : "+") + driver->name;

    const ULONG violations_before = SoftNdkKmVerifierViolationCount();
    int exit_code = 0;
    size_t entered = 0;  // drivers whose DriverEntry succeeded: the first ones
    EnterPhase(Phase::kDriverEntry);
    for (const auto& driver : drivers) {
        NTSTATUS status = driver->object.DriverInit(&driver->object, &driver->registry);  // PASSIVE_LEVEL
        const char* status_name = SoftNdkStatusName(status);
        std::fprintf(stderr, "softndk-kmhost: DriverEntry(%s) = %s (0x%08X)\n", driver->name.c_str(),
                     status_name ? status_name : "NTSTATUS", static_cast<unsigned>(status));
        if (!NT_SUCCESS(status)) {
            exit_code = 3;  // Windows does not call DriverUnload after a failed DriverEntry
            break;
        }
        ++entered;
    }
    if (exit_code == 0) {
        EnterPhase(Phase::kRunning);
        const auto start = std::chrono::steady_clock::now();
        auto idle_since = start;
        while (!g_stop.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const auto now = std::chrono::steady_clock::now();
            if (seconds >= 0 && now - start >= std::chrono::duration<double>(seconds)) break;
            if (stop_when_idle) {
                if (!SoftNdkKmIsIdle()) idle_since = now;
                if (now - idle_since >= std::chrono::milliseconds(200)) break;
            }
        }
    }
    EnterPhase(Phase::kDriverUnload);
    for (size_t i = entered; i-- > 0;) {  // the drivers that started, last first
        LoadedDriver& driver = *drivers[i];
        if (driver.object.DriverUnload == nullptr) {
            std::fprintf(stderr, "softndk-kmhost: %s set no DriverUnload, so it cannot be stopped\n",
                         driver.name.c_str());
            continue;
        }
        driver.object.DriverUnload(&driver.object);
        std::fprintf(stderr, "softndk-kmhost: DriverUnload(%s) returned\n", driver.name.c_str());
    }
    EnterPhase(Phase::kReporting);
    const ULONG leaks = SoftNdkKmReportLeaks();
    if (leaks != 0 && exit_code == 0) exit_code = 4;
    const ULONG violations = SoftNdkKmVerifierViolationCount() - violations_before;
    if (violations != 0) {
        std::fprintf(stderr, "softndk-kmhost: %u Verifier violation(s)\n", violations);
        if (exit_code == 0) exit_code = 5;
    }
    if (SoftNdkKmIsIdle()) {
        SoftNdkKmShutdown();
        for (const auto& driver : drivers) dlclose(driver->module);  // only when no driver code can still run
    }
    if (exit_code == 0) std::fprintf(stderr, "softndk-kmhost: clean exit, no leaks\n");
    return exit_code;
}
