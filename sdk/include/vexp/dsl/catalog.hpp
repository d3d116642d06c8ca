// Deprecated spelling kept for plugins written before the SDK headers had their own
// prefix: include <vexp/schema/catalog.hpp>. Same types, same ABI (version 3); this
// forwarding header goes away with the next ABI version.
#pragma once
#include "vexp/schema/catalog.hpp"
