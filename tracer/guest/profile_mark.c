/*
 * scalecheck profile's window: `profile_mark on` opens it on every vCPU, `profile_mark off`
 * closes it (the plugin's profile=on, tracer/plugin/src/lib.rs). A static program without
 * the C library, so that it runs whatever the guest's root holds.
 */
#include "../include/scalecheck_marker.h"

#define SC_MARK_PROFILE_ON() SC_MARK(0x5c5c0003)
#define SC_MARK_PROFILE_OFF() SC_MARK(0x5c5c0004)

int mark_main(long argc, char **argv);

__asm__(".globl _start\n"
	"_start:\n"
	"	mov (%rsp), %rdi\n"
	"	lea 8(%rsp), %rsi\n"
	"	call mark_main\n"
	"	mov %eax, %edi\n"
	"	mov $60, %eax\n"
	"	syscall\n");

int mark_main(long argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (argv[1][0] == 'o' && argv[1][1] == 'n' && argv[1][2] == 0)
		SC_MARK_PROFILE_ON();
	else
		SC_MARK_PROFILE_OFF();
	return 0;
}
