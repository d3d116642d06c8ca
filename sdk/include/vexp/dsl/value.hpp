// Deprecated spelling kept for plugins written before the SDK headers had their own
// prefix: include <vexp/schema/value.hpp> (namespace vexp::schema since plugin ABI 4;
// vexp::dsl::X still names the same types). This forwarding header and the
// vexp::dsl alias go away with plugin ABI 6.
#pragma once
#include "vexp/schema/value.hpp"
