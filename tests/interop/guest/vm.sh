#!/usr/bin/env bash
# The interop suites' Linux guest: a throw-away qemu VM running Debian 12's kernel with soft-iWARP (siw), the
# rdma-core tools, perftest, the kernel's NVMe over Fabrics target and host, and its SMB server ksmbd with SMB
# Direct (`ksmbd-start` in the guest). The host reaches it only through
# qemu's user-mode network (restrict=on): host 127.0.0.1 ports forwarded into the guest (--forward), and guest
# connections to $HOST_ADDR relayed to host 127.0.0.1 ports (--reverse, relay.py, one process per connection).
#
# Everything the guest runs comes from Debian's package archive (apt-get download); Debian builds its kernel
# without siw and builds ksmbd without SMB Direct, so siw.ko and ksmbd.ko are compiled here from linux-source of the
# same version. Results are cached under
# $GUEST_VM_CACHE (default: <repository>/build/guest-vm). See README.md beside this file.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me="guest-vm"
fail() { echo "$me: error: $*" >&2; exit 2; }
note() { echo "$me: $*" >&2; }

cache=${GUEST_VM_CACHE:-$(cd "$here/../../.." && pwd)/build/guest-vm}
debs=$cache/debs unpacked=$cache/unpacked kbuild=$cache/kbuild images=$cache/images guests=$cache/guests

# The guest's fixed addresses on qemu's user network (10.0.2.0/24): its own, and the one --reverse ports answer on.
guest_addr=10.0.2.15
host_addr=10.0.2.100

user_packages="busybox-static libc6 libgcc-s1 libstdc++6 zlib1g libibverbs1 ibverbs-providers librdmacm1
 libibumad3 rdmacm-utils ibverbs-utils perftest libpci3 libudev1 libnl-3-200 libnl-route-3-200 iproute2 libmnl0 libbsd0 libmd0
 libcap2 libelf1 libselinux1 libpcre2-8-0 ksmbd-tools libglib2.0-0 libnl-genl-3-200 libffi8 libmount1 libblkid1"
user_programs="usr/bin/rdma usr/bin/rping usr/bin/ibv_devinfo usr/bin/ibv_devices usr/bin/ib_write_bw
 usr/bin/ib_read_bw usr/bin/ib_send_bw usr/bin/ib_write_lat usr/bin/ib_read_lat usr/bin/ib_send_lat
 usr/libexec/ksmbd.tools"
verbs_providers="siw"
# Loaded at boot: the first group before the 9p mount, the second for siw. The NVMe-oF modules (and crc64, which
# nvme-core asks the crypto API for) are only copied in, for `modprobe` from a guest command; so are ksmbd (ours,
# with SMB Direct, in place of Debian's) and the ciphers and hashes SMB2 signing and NTLM ask for.
boot_modules="virtio_pci virtio_net 9pnet_virtio 9p"
rdma_modules="crc32c_generic libcrc32c siw ib_uverbs rdma_ucm"
extra_modules="crc32c-intel nvmet nvmet-rdma nvme-rdma crc64_rocksoft_generic ksmbd cifs_arc4 nls_utf8 cmac
 sha512_generic ccm gcm ecb ctr ghash-generic gf128mul md4 des_generic"
host_tools="qemu-system-x86_64:qemu-system-x86 dpkg-deb:dpkg gcc-12:gcc-12 make:make cpio:cpio gzip:gzip
 readelf:binutils python3:python3 xz:xz-utils"

usage() {
  cat <<'EOF'
usage: vm.sh COMMAND [options]
  prepare                      download the packages, build siw.ko, the kernel image and the initramfs (cached)
  start [opts] [-- CMD...]     boot a guest in the background; returns once siw0 is up (CMD runs in the guest)
  exec  [--name N] [--bg] [--timeout S] -- CMD...
                               run CMD in the guest; prints its output, returns its status (--bg: do not wait)
  wait  [--name N] [--timeout S] --listen PORT
                               until guest TCP port PORT is in LISTEN state (read from /proc, no connection)
  stop  [--name N]             power the guest off (qemu killed by its recorded PID if it does not go)
  status [--name N]            running or not, and the guest's listening ports
  console [--name N]           the guest's console log
options for start:
  --name N          several guests side by side (default: default)
  --forward P       host 127.0.0.1:P reaches guest port P (repeatable); P:G, host port P reaches guest port G
  --reverse P       a guest connection to $HOST_ADDR:P reaches host 127.0.0.1:P (repeatable)
  --mem MB          guest memory (default 1024)      --smp N   guest CPUs (default 1)
  --accel kvm|tcg|auto  (default: $GUEST_VM_ACCEL or auto)   --timeout S  seconds to wait for siw0 (default 180)
In the guest: GUEST_ADDR (eth0's address), HOST_ADDR, and `ulimit -l unlimited` (siw charges registered pages).
Environment: GUEST_VM_CACHE (cache folder), GUEST_VM_NO_INSTALL=1 (never apt-get install host tools).
EOF
}

# ---------------------------------------------------------------------------------------------- host tools, accel
ensure_host_tools() {
  local entry missing=""
  for entry in $host_tools; do command -v "${entry%%:*}" >/dev/null 2>&1 || missing+=" ${entry#*:}"; done
  [ -z "$missing" ] && return 0
  if [ "${GUEST_VM_NO_INSTALL:-0}" = 1 ] || [ "$(id -u)" != 0 ]; then
    fail "missing host tools; install the Debian packages:$missing"
  fi
  note "installing host packages:$missing"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing >&2; } ||
    fail "apt-get could not install:$missing"
}

# KVM when /dev/kvm works for a stock kernel; kvm_pvm (a nested paravirtual KVM) cannot run one at speed, so TCG.
choose_accel() {
  local want=${accel:-${GUEST_VM_ACCEL:-auto}}
  if [ "$want" = auto ]; then
    want=tcg
    [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && want=kvm
  fi
  case "$want" in
    kvm) accel_args=(-enable-kvm -cpu host) ;;
    tcg) accel_args=(-accel tcg -cpu max) ;;
    *) fail "--accel takes kvm, tcg or auto, not '$want'" ;;
  esac
  accel_used=$want
}

# ---------------------------------------------------------------------------------------------- packages
kernel_package() {  # linux-image-<abi>, the one linux-image-amd64 depends on
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
    note "apt's package lists look empty; running apt-get update"
    apt-get update >&2 || true
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  fi
  [ -n "$pkg" ] || fail "apt knows no linux-image-amd64 (run apt-get update)"
  echo "$pkg"
}

set_kernel_names() {
  kpkg=$(kernel_package)                     # linux-image-6.1.0-57-amd64
  kabi=${kpkg#linux-image-}                  # 6.1.0-57-amd64
  kseries=$(cut -d. -f1-2 <<<"$kabi")       # 6.1
  kversion=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
  [ -n "$kversion" ] || fail "apt has no version of $kpkg (run apt-get update)"
}

download_packages() {
  local wanted="$user_packages $kpkg=$kversion linux-source-$kseries=$kversion linux-kbuild-$kseries=$kversion
    linux-headers-$kabi=$kversion linux-headers-${kabi%-amd64}-common=$kversion"
  wanted=$(tr -s ' \n' ' ' <<<"$wanted")
  [ -f "$debs/wanted" ] && [ "$(cat "$debs/wanted")" = "$wanted" ] && return 0
  note "downloading the guest's packages into $debs"
  rm -rf "$debs" && mkdir -p "$debs"
  local pkg failed=""
  # shellcheck disable=SC2086
  if ! (cd "$debs" && apt-get download $wanted >"$debs/download.log" 2>&1); then
    for pkg in $wanted; do (cd "$debs" && apt-get download "$pkg" >>"$debs/download.log" 2>&1) || failed+=" $pkg"; done
    [ -z "$failed" ] || fail "apt-get download failed for:$failed (log: $debs/download.log)"
  fi
  echo "$wanted" >"$debs/wanted"
}

deb_file() {
  local file
  file=$(compgen -G "$debs/${1}_*.deb" | head -n 1)
  [ -n "$file" ] || fail "package $1 was not downloaded"
  echo "$file"
}

unpack_packages() {
  [ -f "$unpacked/wanted" ] && cmp -s "$unpacked/wanted" "$debs/wanted" && return 0
  note "unpacking the guest's packages"
  rm -rf "$unpacked" && mkdir -p "$unpacked"
  local pkg
  for pkg in $user_packages "$kpkg"; do dpkg-deb -x "$(deb_file "$pkg")" "$unpacked"; done
  [ -d "$unpacked/lib/modules/$kabi" ] || fail "$kpkg holds no modules for $kabi"
  cp "$debs/wanted" "$unpacked/wanted"
}

# siw.ko and ksmbd.ko, out of tree, from linux-source of exactly the image's version. siw is required; a ksmbd that
# does not build leaves its reason in images/ksmbd.failed, which `ksmbd-start` in the guest (and so the SMB Direct
# suite) reports, while the other suites go on.
build_modules() {
  # A failed ksmbd is tried again once this script is newer than its failure.
  [ -f "$images/siw.ko" ] && { [ -f "$images/ksmbd.ko" ] || [ "$images/ksmbd.failed" -nt "$here/vm.sh" ]; } &&
    [ "$(cat "$kbuild/version" 2>/dev/null)" = "$kversion" ] && return 0
  note "building siw.ko and ksmbd.ko for $kabi from linux-source-$kseries $kversion"
  rm -rf "$kbuild" && mkdir -p "$kbuild" "$images" && rm -f "$images/ksmbd.ko" "$images/ksmbd.failed"
  local pkg common=linux-headers-${kabi%-amd64}-common
  for pkg in "linux-headers-$kabi" "$common" "linux-kbuild-$kseries" "linux-source-$kseries"; do
    dpkg-deb -x "$(deb_file "$pkg")" "$kbuild"
  done
  headers=$kbuild/usr/src/linux-headers-$kabi
  # The packaged Makefile includes the common headers by their installed path; point it at the unpacked ones.
  echo "include $kbuild/usr/src/$common/Makefile" >"$headers/Makefile"
  local tarball src=$kbuild/linux-source-$kseries
  tarball=$(compgen -G "$kbuild/usr/src/linux-source-$kseries.tar.*" | head -n 1) || fail "no linux-source tarball"
  tar -C "$kbuild" -xf "$tarball" --wildcards "linux-source-$kseries/drivers/infiniband/sw/siw/*" \
    "linux-source-$kseries/fs/smb/*" "linux-source-$kseries/fs/*.h" "linux-source-$kseries/scripts/asn1_compiler.c" \
    "linux-source-$kseries/include/linux/asn1*.h"
  mkdir -p "$kbuild/siw" && cp "$src/drivers/infiniband/sw/siw/"* "$kbuild/siw/"
  make -C "$headers" M="$kbuild/siw" CONFIG_RDMA_SIW=m modules -j"$(nproc)" >"$kbuild/build.log" 2>&1 ||
    { tail -n 20 "$kbuild/build.log" >&2; fail "building siw.ko failed (log: $kbuild/build.log)"; }
  cp "$kbuild/siw/siw.ko" "$images/siw.ko"
  local why
  why=$(build_ksmbd_module "$src" 2>&1) || { echo "$why" >"$images/ksmbd.failed"; note "ksmbd.ko: $why"; }
  rm -rf "$src" "$tarball"
  echo "$kversion" >"$kbuild/version"
}

# ksmbd with CONFIG_SMB_SERVER_SMBDIRECT (transport_rdma.h tests the symbol with #ifdef, so the define too). The
# headers package lacks scripts/asn1_compiler, which ksmbd's SPNEGO parsers need: it is built from the source. One
# change to the source: ksmbd-tools 3.4.7 (Debian 12) answers a share-config request with payload_sz 0, which this
# kernel's ipc_validate_msg refuses, so every tree connect failed with STATUS_BAD_NETWORK_NAME; the module takes the
# payload's size from the message's when it is 0. Prints why and returns 1 when it cannot be built.
build_ksmbd_module() {
  local src=$1 dir=$kbuild/ksmbd/fs/smb/server
  mkdir -p "$kbuild/ksmbd/fs/smb" && cp -r "$src/fs/smb/server" "$src/fs/smb/common" "$kbuild/ksmbd/fs/smb/" &&
    cp "$src/fs/"*.h "$kbuild/ksmbd/fs/" || { echo "the linux-source has no fs/smb/server"; return 1; }
  gcc -O2 -I "$src/include" -o "$headers/scripts/asn1_compiler" "$src/scripts/asn1_compiler.c" \
    >"$kbuild/ksmbd-build.log" 2>&1 || { echo "asn1_compiler did not build (log: $kbuild/ksmbd-build.log)"; return 1; }
  python3 - "$dir/transport_ipc.c" <<'PATCH' || { echo "transport_ipc.c has changed: the payload_sz fix no longer applies"; return 1; }
import sys
path = sys.argv[1]
text = open(path).read()
anchor = """		if (entry->msg_sz < sizeof(struct ksmbd_share_config_response))
			return -EINVAL;
"""
fix = """		/* ksmbd-tools 3.4.7 (Debian 12) leaves payload_sz 0 */
		if (resp->payload_sz == 0)
			resp->payload_sz = entry->msg_sz -
				sizeof(struct ksmbd_share_config_response);
"""
if text.count(anchor) != 1:
    sys.exit(1)
open(path, "w").write(text.replace(anchor, anchor + fix))
PATCH
  make -C "$headers" M="$dir" CONFIG_SMB_SERVER=m CONFIG_SMB_SERVER_SMBDIRECT=y \
    ccflags-y=-DCONFIG_SMB_SERVER_SMBDIRECT modules -j"$(nproc)" >>"$kbuild/ksmbd-build.log" 2>&1 ||
    { tail -n 5 "$kbuild/ksmbd-build.log"; echo "building ksmbd.ko failed (log: $kbuild/ksmbd-build.log)"; return 1; }
  strip --strip-debug -o "$images/ksmbd.ko" "$dir/ksmbd.ko"
}

# ---------------------------------------------------------------------------------------------- initramfs
library_path() {  # a shared library's path inside the unpacked packages
  local dir
  for dir in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64; do
    [ -e "$unpacked/$dir/$1" ] && { echo "$unpacked/$dir/$1"; return 0; }
  done
  return 1
}

copy_with_libraries() {  # copies the ELF files $2... into $1/usr/bin-or-where-given and every library they need
  local root=$1 todo=("${@:2}") seen=" " file lib path
  while ((${#todo[@]})); do
    file=${todo[0]} todo=("${todo[@]:1}")
    for lib in $(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ "$seen" == *" $lib "* ]] && continue
      seen+="$lib "
      path=$(library_path "$lib") || fail "no package here provides $lib (needed by $file)"
      cp -L "$path" "$root/lib/x86_64-linux-gnu/$lib"
      todo+=("$path")
    done
  done
}

build_initramfs() {
  local image=$images/initrd.img inputs=("$here/init" "$here/vm.sh" "$here/ksmbd-start" "$images/siw.ko" "$unpacked/wanted")
  [ -f "$images/ksmbd.ko" ] && inputs+=("$images/ksmbd.ko")
  if [ -f "$image" ]; then
    local input stale=0
    for input in "${inputs[@]}"; do [ "$input" -nt "$image" ] && stale=1; done
    [ "$stale" = 0 ] && return 0
  fi
  note "building the initramfs"
  local root=$cache/initramfs
  rm -rf "$root"
  mkdir -p "$root"/{bin,usr/bin,etc/libibverbs.d,proc,sys,dev,tmp,run,ctl,lib64,lib/x86_64-linux-gnu}
  mkdir -p "$root/usr/lib/x86_64-linux-gnu/libibverbs"
  cp "$unpacked/bin/busybox" "$root/bin/busybox"

  local modules=$unpacked/lib/modules/$kabi name dep files=""
  mkdir -p "$modules/extra" && cp "$images/siw.ko" "$modules/extra/siw.ko"
  "$unpacked/bin/busybox" depmod -b "$unpacked" "$kabi" || fail "depmod failed"
  for name in $boot_modules $rdma_modules $extra_modules; do
    dep=$(grep -E "(^|/)(${name//-/_}|${name//_/-})\.ko(\.xz)?:" "$modules/modules.dep" | head -n 1) ||
      fail "$kpkg has no module $name"
    files+=" ${dep//:/}"
  done
  for name in $(tr ' ' '\n' <<<"$files" | sort -u); do
    mkdir -p "$root/lib/modules/$kabi/$(dirname "$name")"
    cp "$modules/$name" "$root/lib/modules/$kabi/$name"
  done
  # Ours in place of Debian's ksmbd (built without SMB Direct); none at all when ours did not build.
  local stock_ksmbd
  stock_ksmbd=$(compgen -G "$root/lib/modules/$kabi/kernel/fs/smb/server/ksmbd.ko*" | head -n 1) || true
  [ -n "$stock_ksmbd" ] && rm -f "$stock_ksmbd"
  if [ -f "$images/ksmbd.ko" ]; then
    mkdir -p "$root/lib/modules/$kabi/extra" && cp "$images/ksmbd.ko" "$root/lib/modules/$kabi/extra/ksmbd.ko"
  else
    cp "$images/ksmbd.failed" "$root/etc/ksmbd.failed" 2>/dev/null || echo "ksmbd.ko was not built" >"$root/etc/ksmbd.failed"
  fi
  cp "$modules/modules.builtin" "$modules/modules.order" "$root/lib/modules/$kabi/"
  "$unpacked/bin/busybox" depmod -b "$root" "$kabi" || fail "depmod (initramfs) failed"

  local program elves=()
  for program in $user_programs; do
    [ -f "$unpacked/$program" ] || fail "$program is in none of the guest's packages"
    cp "$unpacked/$program" "$root/usr/bin/"
    elves+=("$unpacked/$program")
  done
  for name in $verbs_providers; do
    cp "$unpacked/etc/libibverbs.d/$name.driver" "$root/etc/libibverbs.d/"
    cp "$unpacked/usr/lib/x86_64-linux-gnu/libibverbs/lib$name-rdmav"*.so "$root/usr/lib/x86_64-linux-gnu/libibverbs/"
    elves+=("$unpacked/usr/lib/x86_64-linux-gnu/libibverbs/lib$name-rdmav"*.so)
  done
  copy_with_libraries "$root" "${elves[@]}"
  # glibc opens libgcc_s at run time (pthread_exit unwinds through it): no ELF names it as needed.
  for name in libgcc_s.so.1 libstdc++.so.6; do cp -L "$(library_path "$name")" "$root/lib/x86_64-linux-gnu/$name"; done
  cp -L "$unpacked/lib64/ld-linux-x86-64.so.2" "$root/lib64/"

  for name in ksmbd.mountd ksmbd.control ksmbd.adduser ksmbd.addshare; do ln -sf ksmbd.tools "$root/usr/bin/$name"; done
  cp "$here/ksmbd-start" "$root/usr/bin/ksmbd-start" && chmod 755 "$root/usr/bin/ksmbd-start"

  cp "$here/init" "$root/init" && chmod 755 "$root/init"
  # ksmbd's guest account is nobody; the share's user account (ksmbd-start --user) is smbuser.
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'smbuser:x:1000:1000:smbuser:/tmp:/bin/false\n' >>"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\nsmbuser:x:1000:\n' >"$root/etc/group"
  printf 'passwd: files\ngroup: files\nshadow: files\n' >"$root/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
  echo "$kpkg $kversion" >"$root/etc/guest-kernel"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$image.new" || fail "cpio failed"
  mv "$image.new" "$image"
  # qemu boots the uncompressed ELF kernel through its PVH entry: no real mode and no xz decompression under TCG.
  cp "$unpacked/boot/vmlinuz-$kabi" "$images/vmlinuz"
  python3 "$here/unpack_kernel.py" "$images/vmlinuz" "$images/vmlinux" || rm -f "$images/vmlinux"
  echo "$kpkg $kversion" >"$images/kernel"
  note "guest image ready: $image ($(du -h "$image" | cut -f1))"
}

cmd_prepare() {
  ensure_host_tools
  set_kernel_names
  download_packages
  unpack_packages
  build_modules
  build_initramfs
}

prepared() {  # the images exist and nothing they are built from is newer
  [ -f "$images/initrd.img" ] && [ -f "$images/kernel" ] || return 1
  [ "$here/init" -nt "$images/initrd.img" ] && return 1
  [ "$here/vm.sh" -nt "$images/initrd.img" ] && return 1
  [ "$here/ksmbd-start" -nt "$images/initrd.img" ] && return 1
  return 0
}

# ---------------------------------------------------------------------------------------------- guests
name=default forwards=() reverses=() mem=1024 smp=1 accel="" timeout="" background=0 listen_port="" command=()
parse_options() {
  while (($#)); do
    case "$1" in
      --name) name=$2; shift 2 ;;
      --forward) forwards+=("$2"); shift 2 ;;
      --reverse) reverses+=("$2"); shift 2 ;;
      --mem) mem=$2; shift 2 ;;
      --smp) smp=$2; shift 2 ;;
      --accel) accel=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --bg) background=1; shift ;;
      --listen) listen_port=$2; shift 2 ;;
      --) shift; command=("$@"); break ;;
      *) fail "unknown option '$1' (vm.sh help)" ;;
    esac
  done
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || fail "--name '$name': letters, digits, '_', '.' and '-' only"
  guest=$guests/$name ctl=$guest/ctl
}

quoted_command() {  # the command as one sh line
  local word line="exec"
  for word in "${command[@]}"; do line+=" '${word//\'/\'\\\'\'}'"; done
  echo "$line"
}

qemu_pid() {  # the PID of this guest's qemu while it runs; checks the PID is still that qemu
  local pid
  pid=$(cat "$guest/qemu.pid" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$guest/" || return 1
  echo "$pid"
}

port_number() { [[ "$1" =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536)) || fail "$2 '$1': a port from 1 to 65535"; }

cmd_start() {
  parse_options "$@"
  choose_accel
  prepared || cmd_prepare
  qemu_pid >/dev/null && fail "guest '$name' is already running (vm.sh stop --name $name)"
  rm -rf "$guest" && mkdir -p "$ctl/jobs"
  ((${#command[@]})) && quoted_command >"$ctl/start.sh"
  local net="user,id=net0,restrict=on,net=10.0.2.0/24,host=10.0.2.2" port
  for port in "${forwards[@]+"${forwards[@]}"}"; do
    local host_port=${port%%:*} guest_port=${port#*:}
    port_number "$host_port" --forward
    port_number "$guest_port" --forward
    net+=",hostfwd=tcp:127.0.0.1:$host_port-$guest_addr:$guest_port"
  done
  local relay=${here//,/,,}/relay.py
  for port in "${reverses[@]+"${reverses[@]}"}"; do
    port_number "$port" --reverse
    net+=",guestfwd=tcp:$host_addr:$port-cmd:python3 $relay $port"
  done
  local kernel=$images/vmlinuz
  [ -f "$images/vmlinux" ] && kernel=$images/vmlinux
  echo "$accel_used" >"$guest/accel"
  date +%s.%N >"$guest/started"
  if ! qemu-system-x86_64 "${accel_args[@]}" -m "$mem" -smp "$smp" -nodefaults -no-user-config -no-reboot \
      -display none -kernel "$kernel" -initrd "$images/initrd.img" \
      -append "console=ttyS0 panic=-1 quiet loglevel=3 guest.addr=$guest_addr guest.host=$host_addr" \
      -netdev "$net" -device virtio-net-pci,netdev=net0 \
      -fsdev "local,id=ctl,path=$ctl,security_model=none" -device virtio-9p-pci,fsdev=ctl,mount_tag=ctl \
      -device virtio-rng-pci -serial "file:$guest/console.log" -monitor none \
      -daemonize -pidfile "$guest/qemu.pid" 2>"$guest/qemu.err"; then
    sed 's/^/  | /' "$guest/qemu.err" >&2
    # A forward onto a port something else holds is the usual cause; the caller picks other ports.
    grep -q "host forwarding rule" "$guest/qemu.err" && fail "qemu failed to start: a --forward port is taken (above)"
    fail "qemu failed to start (above)"
  fi
  local deadline=$((SECONDS + ${timeout:-180}))
  until [ -f "$ctl/ready" ]; do
    if ! qemu_pid >/dev/null; then tail -n 30 "$guest/console.log" >&2; fail "guest '$name' died while booting"; fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "$guest/console.log" >&2
      fail "guest '$name': siw0 not up after ${timeout:-180} s (console above)"
    fi
    sleep 0.1
  done
  if [ -f "$ctl/setup-failed" ]; then cat "$ctl/setup-failed" >&2; fail "guest '$name' booted but its set-up failed"; fi
  note "guest '$name' up in $(awk -v a="$(cat "$guest/started")" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s," \
    "accel $accel_used ($(cat "$ctl/ready"))"
}

cmd_exec() {
  parse_options "$@"
  ((${#command[@]})) || fail "exec needs a command after --"
  qemu_pid >/dev/null || fail "guest '$name' is not running (vm.sh start --name $name)"
  local job
  job=$(date +%s%N)-$RANDOM
  quoted_command >"$ctl/jobs/$job.new"
  mv "$ctl/jobs/$job.new" "$ctl/jobs/$job.sh"  # the guest picks up only whole .sh files
  if [ "$background" = 1 ]; then echo "$job"; return 0; fi
  local deadline=$((SECONDS + ${timeout:-600}))
  until [ -f "$ctl/jobs/$job.status" ]; do
    qemu_pid >/dev/null || { cat "$ctl/jobs/$job.out" 2>/dev/null; fail "guest '$name' stopped while running the command"; }
    if ((SECONDS >= deadline)); then
      cat "$ctl/jobs/$job.out" 2>/dev/null
      note "the command did not end within ${timeout:-600} s"
      exit 124
    fi
    sleep 0.05
  done
  cat "$ctl/jobs/$job.out"
  exit "$(cat "$ctl/jobs/$job.status")"
}

cmd_wait() {
  parse_options "$@"
  port_number "$listen_port" --listen
  local deadline=$((SECONDS + ${timeout:-120}))
  until grep -qx "$listen_port" "$ctl/listening" 2>/dev/null; do
    qemu_pid >/dev/null || fail "guest '$name' is not running"
    ((SECONDS < deadline)) || fail "guest port $listen_port not listening after ${timeout:-120} s"
    sleep 0.1
  done
}

cmd_stop() {
  parse_options "$@"
  local pid i
  pid=$(qemu_pid) || return 0
  touch "$ctl/stop"
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  note "guest '$name' did not power off in 10 s; terminating its qemu (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_status() {
  parse_options "$@"
  local pid
  pid=$(qemu_pid) || { echo "guest $name: not running"; return 1; }
  echo "guest $name: running (qemu pid $pid), $(cat "$ctl/ready" 2>/dev/null || echo booting)"
  echo "listening guest ports: $(tr '\n' ' ' 2>/dev/null <"$ctl/listening")"
}

cmd_console() { parse_options "$@"; cat "$guest/console.log" 2>/dev/null || fail "guest '$name' has no console log"; }

case "${1:-help}" in
  prepare) cmd_prepare ;;
  start | exec | wait | stop | status | console) verb=$1; shift; "cmd_$verb" "$@" ;;
  help | -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
