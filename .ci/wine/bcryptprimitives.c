/*
 * Stand-in for bcryptprimitives.dll, which Wine 8.0 lacks.
 *
 * Rust's std (1.78+) on Windows gets its randomness from
 * bcryptprimitives.dll!ProcessPrng; under Wine 8.0 every Rust exe then
 * fails to load (exit 53, "Library bcryptprimitives.dll not found" with
 * WINEDEBUG=err+module). This DLL exports ProcessPrng on top of
 * BCryptGenRandom, which Wine has. Found through WINEPATH by the test exes
 * and every child they start. CI only: never shipped.
 *
 * x86_64-w64-mingw32-gcc -O2 -shared -s -o bcryptprimitives.dll \
 *     bcryptprimitives.c bcryptprimitives.def -lbcrypt
 */
#include <windows.h>
#include <bcrypt.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG)))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
