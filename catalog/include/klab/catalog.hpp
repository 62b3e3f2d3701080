#pragma once
// The catalogue: the registry with every op, variant and experiment of klab (built once, in
// catalog/register.cpp). Only what sits above the experiments (apps/, tests/) calls it; an
// experiment finds its ops and variants through its Context (Context::registry()).
#include "klab/registry.hpp"

namespace klab {

const Registry& registry();

}  // namespace klab
