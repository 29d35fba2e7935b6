/* The program a posix_spawn call of the guest driver starts (/bin/exit0): it exits at
 * once, so that the spawn's work is the kernel's (a new mm, an exec), not a program's.
 * No libc: the whole program is the exit system call. */
void _start(void);
void _start(void)
{
	__asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
	__builtin_unreachable();
}
