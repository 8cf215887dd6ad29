/* ms_abseil.h - process-wide settings of the Abseil library under gRPC. */
#ifndef MS_ABSEIL_H
#define MS_ABSEIL_H

/* Turns off Abseil's debug-build lock-order ("deadlock") detection, which
 * Debian's Abseil (built without NDEBUG) leaves on: with it every lock and
 * unlock of a gRPC mutex updates a global lock graph, a few percent of a
 * small call's CPU. Release builds of Abseil (as TF Serving's) have it off.
 * Found by name at run time; does nothing when the library lacks the switch.
 * Call before grpc_init. Returns 1 when it was turned off. */
int ms_abseil_deadlock_detection_off(void);

#endif /* MS_ABSEIL_H */
