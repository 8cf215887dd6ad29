/* cli_npformat.h - renders a tensor the way numpy's str(array) does, for the
 * CLI (`dcmserve run` prints results like saved_model_cli, which prints
 * numpy arrays).
 *
 * Follows numpy's default print options: floats in the shortest form that
 * reads back to the same value, at most 8 fractional digits, scientific
 * notation when the largest magnitude is >= 1e8 or the smallest non-zero one
 * is < 1e-4 or their ratio is > 1000; columns padded to a common width; rows
 * wrapped at 75 characters; arrays of more than 1000 elements summarised with
 * "..." around the 3 first and last items of each axis; strings as Python
 * bytes literals (b'...'). Supported dtypes: float, double, all integer
 * widths, bool, string; others render as a one-line description.
 */
#ifndef CLI_NPFORMAT_H
#define CLI_NPFORMAT_H

#include "rt_tensor.h"

/* Returns a malloc'ed NUL-terminated string (caller frees), NULL on OOM. */
char *cli_npformat(const rt_tensor *t);

#endif /* CLI_NPFORMAT_H */
