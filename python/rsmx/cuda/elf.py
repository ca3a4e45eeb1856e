"""The function symbols of a CUBIN, read from its ELF symbol table (to check that every
kernel the operators name was compiled)."""

from __future__ import annotations

import struct

_SHT_SYMTAB = 2
_STT_FUNC = 2


def function_names(cubin: bytes) -> set[str]:
    """Names of the function symbols in an ELF64 little-endian image.

    Raises
    ------
    ValueError
        If ``cubin`` is not such an image.
    """
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not an ELF64 little-endian image")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB or entsize == 0:
            continue
        strtab_off = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", cubin, offset + k * entsize)
            if st_info & 0xF != _STT_FUNC:
                continue
            end = cubin.index(b"\0", strtab_off + st_name)
            names.add(cubin[strtab_off + st_name:end].decode())
    return names
