#!/usr/bin/env python3
"""unpack_kernel.py VMLINUZ VMLINUX: the uncompressed ELF kernel inside Debian's xz-compressed bzImage, which qemu
boots through its PVH entry point. Exits 1 when the image holds no xz stream or the stream is not an ELF file."""
import lzma
import sys

image = open(sys.argv[1], "rb").read()
start = image.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit(1)
kernel = lzma.LZMADecompressor().decompress(image[start:])
if not kernel.startswith(b"\x7fELF"):
    sys.exit(1)
with open(sys.argv[2], "wb") as out:
    out.write(kernel)
