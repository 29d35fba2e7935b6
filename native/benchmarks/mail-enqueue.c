/* mail-enqueue SPOOL SOCKET MAILBOX < message
 * Writes the message and its envelope into the spool and notifies mail-qman. */
#define _GNU_SOURCE
#include "mail-common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

const char *mail_program_name = "mail-enqueue";

int main(int argc, char **argv)
{
    if (argc != 4)
        mail_fail("usage: mail-enqueue SPOOL SOCKET MAILBOX < message");
    const char *spool = argv[1], *socket_path = argv[2], *mailbox = argv[3];
    size_t length;
    char *message = mail_read_all(STDIN_FILENO, &length);

    char id[MAIL_ID_MAX], path[4200];
    mail_unique_id(id);
    snprintf(path, sizeof path, "%s/mess/%s", spool, id);
    mail_write_file(path, message, length);
    /* The envelope goes last: once it exists the message is complete. */
    snprintf(path, sizeof path, "%s/todo/%s", spool, id);
    mail_write_file(path, mailbox, strlen(mailbox));

    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        mail_fail("socket: %s", strerror(errno));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof addr.sun_path)
        mail_fail("socket path too long: %s", socket_path);
    strcpy(addr.sun_path, socket_path);
    if (sendto(sock, id, strlen(id), 0, (struct sockaddr *)&addr, sizeof addr) < 0)
        mail_fail("notify %s: %s", socket_path, strerror(errno));
    return 0;
}
