/* The program the guest driver's exec runs (/bin/exec_image): the new image of a test
 * process whose call is exec. Its first instruction ends the traced region, so the region
 * holds the exec and the new image's start, nothing of the program's own. Then, outside
 * the region, it reports what the model says an exec leaves (which fds below
 * SC_ANYFD_BASE are open, which of the MODEL_PAGES pages from SC_MAP_BASE are mapped) over
 * EXEC_REPORT_FD to the driver's stand-in (op_exec in ops.c), lets the stopped stand-in
 * continue the driver's part of the test, and exits once it has: its exit then falls
 * where the driver's test processes exit. No libc: a handful of system calls. */
#include <asm/unistd.h>
#include <fcntl.h>
#include <signal.h>

#include "driver.h"

static long sys4(long nr, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return ret;
}

static long sys3(long nr, long a, long b, long c)
{
	return sys4(nr, a, b, c, 0);
}

void _start(void) __attribute__((noreturn, force_align_arg_pointer));
void _start(void)
{
	SC_MARK_END();
	struct exec_report report = {0, 0};
	long standin = 0;
	unsigned char residency;
	if (sys3(__NR_read, EXEC_REPORT_FD, (long)&standin, sizeof standin) != sizeof standin)
		sys3(__NR_exit, 1, 0, 0);
	for (int fd = 0; fd < SC_ANYFD_BASE; fd++)
		if (sys3(__NR_fcntl, fd, F_GETFD, 0) >= 0)
			report.open_fds |= 1UL << fd;
	for (int page = 0; page < MODEL_PAGES; page++)
		if (sys3(__NR_mincore, SC_MAP_BASE + (long)page * SC_UNIT, SC_UNIT, (long)&residency) == 0)
			report.mapped_pages |= 1UL << page;
	sys3(__NR_write, EXEC_REPORT_FD, (long)&report, sizeof report);
	sys3(__NR_kill, standin, SIGCONT, 0);
	sys4(__NR_wait4, standin, 0, 0, 0);
	sys3(__NR_exit, 0, 0, 0);
	__builtin_unreachable();
}
