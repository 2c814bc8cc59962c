/* blas.h -- the core's process-level state, internal to core/.
 *
 * OpenBLAS is process-global: its kernels are picked when the library
 * loads, its thread pool is shared, and its pthread build crashes past 128
 * calling threads. blas.c keeps all of that away from the math: the kernel
 * selection by re-exec and att_init() (public, in attention.h), and for
 * attention.c the thread count of a call and the gate every call passes
 * through:
 *
 *     int nt = att_gate_enter(wanted);   // may wait; nt ≤ wanted
 *     ... compute on nt threads ...
 *     att_gate_leave(nt);
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_BLAS_H
#define ATT_BLAS_H

/* Threads one att_forward() call may split its work over: att_init()'s
 * count, 1 … ATT_MAX_THREADS (1 before att_init()). */
int att_threads_per_call(void);

/* Take up to `want` of the ATT_MAX_CONCURRENT units (1 in all with a serial
 * OpenBLAS), waiting until they are free; returns how many were granted,
 * 1 … want. Each thread of a call inside OpenBLAS holds one unit. */
int att_gate_enter(int want);

/* Give back what att_gate_enter() granted. */
void att_gate_leave(int units);

#endif
