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

#define SC_MARK(magic) __asm__ volatile(".byte 0x0f,0x1f,0x80\n\t.long " #magic ::: "memory")
#define SC_MARK_START() SC_MARK(0x5c5c0001)
#define SC_MARK_END() SC_MARK(0x5c5c0002)

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
