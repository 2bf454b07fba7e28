// The compile-time half of cu/kernels.def: a kernel whose parameters differ from its line there
// (their number, or the kind and size of one) fails the build, so the host's parameter sizes
// (src/cuda/kreg.c reads the same lines) always match the kernels'.
#pragma once
#include <stddef.h>
#include <type_traits>

// The letter of cu/kernels.def for a parameter type. Pointers are told by size, not by
// std::is_pointer: a __restrict__ qualifier may survive in the deduced type.
template <class T> constexpr char zr_kkind() {
    return std::is_floating_point<T>::value ? (sizeof(T) == 4 ? 'F' : '?')
           : std::is_integral<T>::value     ? (sizeof(T) == 4 ? 'I' : sizeof(T) == 8 ? 'L' : '?')
           : sizeof(T) == 8                 ? 'P'
                                            : '?';
}

template <class F> struct ZrKSig;
template <class... A> struct ZrKSig<void (*)(A...)> {
    static constexpr bool match(const char *params) {
        const char got[] = {zr_kkind<A>()..., '\0'};
        for (size_t i = 0; i <= sizeof...(A); i++)
            if (got[i] != params[i]) return false;
        return true;
    }
};

#define ZR_KCHECK(name, params) \
    static_assert(ZrKSig<decltype(&name)>::match(params), #name ": parameters differ from cu/kernels.def")

// The parameters of each per-type family, for ZR_KCHECK_FAMILY where cu/ defines its kernels.
#define ZR_KFAMILY(field, prefix, suffix, types, params) constexpr const char *zr_kparams_##field = params;
#include "kernels.def"
#define ZR_KCHECK_FAMILY(field, name) ZR_KCHECK(name, zr_kparams_##field)
