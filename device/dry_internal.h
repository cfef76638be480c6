/* device/dry.c, for device/device.c only: the host memory behind a dry allocation. */
#ifndef MINIDC_DRY_INTERNAL_H
#define MINIDC_DRY_INTERNAL_H

#include <stddef.h>

/* Maps `head` bytes of private memory followed by `bytes` of the shared window repeated;
 * returns the start of the head (NULL if the system refuses). head <= one page. */
void *mdc_i_dry_map(size_t bytes, size_t head);
/* Unmaps what mdc_i_dry_map(bytes, head) returned as p. */
void mdc_i_dry_unmap(void *p, size_t bytes, size_t head);

#endif
