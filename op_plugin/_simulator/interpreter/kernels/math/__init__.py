"""Math ops (CANN ops-math ``math/``).

* arithmetic: the binary arithmetic ops, AddN, Axpy(V2), Muls, Adds, Sxpy, Addcdiv, Addcmul, Lerp
* compare: comparison, logic and bitwise ops (Equal, Less, LogicalAnd, BitwiseAnd, RightShift, Invert, IsNan, ...)
* complex: Real, Imag, Complex, FFT, FFT2D, IFFT, IFFT2D
* select: Select, SelectV2, ClipByValue(V2), MaskedFill
* sort: Sort, TopKV2, SearchSorted
* unary: the unary math ops, Erfinv, Log, Exp, NanToNum, Cast
"""
