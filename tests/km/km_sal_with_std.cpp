// Issue 19 §1: the SAL annotations (reserved-style names such as _Pre_, _Null_, _Const_) expand to nothing, so
// they must not meet a name the C++ standard library or googletest uses. sal.h first, then all of them.
#include <sal.h>

#include <bits/stdc++.h>
#include <gtest/gtest.h>

int softndk_km_sal_with_std;
