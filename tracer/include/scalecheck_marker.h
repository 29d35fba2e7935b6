/*
 * Marker instructions that bracket a traced region (shared by the guest driver and the
 * user-space harness; the QEMU plugin, tracer/plugin/src/lib.rs, recognises the same
 * bytes). Each is `nopl MAGIC(%rax)`: a 7-byte NOP carrying a 32-bit magic, harmless
 * without the plugin.
 *
 * A region's tag (32 bits) is emitted bit by bit, most significant first, before its start
 * marker; the host joins the two calls' regions of one test repeat by it.
 */
#ifndef SCALECHECK_MARKER_H
#define SCALECHECK_MARKER_H

#include <stdint.h>

#define SC_MARK_BYTES(magic) ".byte 0x0f,0x1f,0x80\n\t.long " #magic
#define SC_MARK(magic) __asm__ volatile(SC_MARK_BYTES(magic) ::: "memory")
#define SC_MARK_START() SC_MARK(0x5c5c0001)
#define SC_MARK_END() SC_MARK(0x5c5c0002)
/* The end of one operation of a benchmark's loop (native/harness's hc_count): in the
 * plugin's quantum schedule the vCPU's turn ends there, so that an operation shorter than
 * a turn runs alone in it, as one operation on each core at a time does. No memory
 * clobber: where it falls among the loop's accesses does not matter, and the loop's code
 * stays what it is without the tracer. */
#define SC_MARK_OPERATION_END() __asm__ volatile(SC_MARK_BYTES(0x5c5c0005))

static inline void sc_emit_tag(uint32_t tag)
{
	for (int bit = 31; bit >= 0; bit--) {
		if ((tag >> bit) & 1)
			SC_MARK(0x5c5c0011);
		else
			SC_MARK(0x5c5c0010);
	}
}

#endif
