// Hyperscan (or its portable fork Vectorscan): pkg-config `libhs` puts its include directory on the path.
#include <hs.h>
