/* Kernel facts for naming, dumped once in a probe boot: the release, /proc/kallsyms and
 * the per-cpu area offsets (read from /proc/kcore). */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "driver.h"

static int read_kcore(unsigned long vaddr, void *buf, size_t len)
{
	int fd = open("/proc/kcore", O_RDONLY);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int found = -1;
	if (pread(fd, &eh, sizeof eh, 0) == sizeof eh) {
		for (int i = 0; i < eh.e_phnum && found < 0; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof ph)
				break;
			if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr + len <= ph.p_vaddr + ph.p_memsz)
				found = pread(fd, buf, len, ph.p_offset + (vaddr - ph.p_vaddr)) == (ssize_t)len ? 0 : -1;
		}
	}
	close(fd);
	return found;
}

void dump_kernel_facts(void)
{
	struct utsname u;
	uname(&u);
	sc_wire_release(u.release);
	int fd = open("/proc/kallsyms", O_RDONLY);
	if (fd < 0)
		fatal("open /proc/kallsyms");
	sc_wire_kallsyms(fd);
	close(fd);
	unsigned long per_cpu_offset = 0;
	FILE *syms = fopen("/proc/kallsyms", "r");
	char line[512];
	while (syms && fgets(line, sizeof line, syms))
		if (strstr(line, " __per_cpu_offset\n"))
			per_cpu_offset = strtoul(line, NULL, 16);
	if (syms)
		fclose(syms);
	int ncpus = sysconf(_SC_NPROCESSORS_CONF);
	for (int cpu = 0; cpu < ncpus; cpu++) {
		unsigned long offset;
		if (per_cpu_offset && read_kcore(per_cpu_offset + 8 * cpu, &offset, 8) == 0)
			sc_wire_percpu_offset(cpu, offset);
	}
}
