/* srv_b64.h - base64 as the REST APIs use it. Results are malloc'ed and
 * owned by the caller. */
#ifndef SRV_B64_H
#define SRV_B64_H

#include <stddef.h>
#include <stdint.h>

/* Standard or URL-safe base64 (padding optional) -> bytes (*n of them); NULL
 * when the text is not base64 or on OOM. */
uint8_t *srv_b64_decode(const char *s, size_t *n);
/* bytes -> standard base64 text with padding; NULL on OOM. */
char *srv_b64_encode(const uint8_t *p, size_t n);

#endif /* SRV_B64_H */
