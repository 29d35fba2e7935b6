/* Opens and closes a file in a loop in N threads (one fd table) or N processes. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static long rounds;
static void *worker(void *arg)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/f%ld", (long)arg);
	close(open(path, O_CREAT | O_RDWR, 0600));
	for (long i = 0; i < rounds; i++)
		close(open(path, O_RDONLY));
	return NULL;
}
int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 2;
	rounds = argc > 3 ? atol(argv[3]) : 2000;
	pthread_t t[64];
	if (argc > 1 && strcmp(argv[1], "processes") == 0) {
		for (long i = 0; i < n; i++)
			if (fork() == 0) { worker((void *)i); _exit(0); }
		while (wait(NULL) > 0) ;
		return 0;
	}
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
