/* mail-deliver MAILDIR MAILBOX < message
 * Delivers one message into MAILDIR/MAILBOX the Maildir way: tmp/ then rename into new/. */
#define _GNU_SOURCE
#include "mail-common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *mail_program_name = "mail-deliver";

int main(int argc, char **argv)
{
    if (argc != 3)
        mail_fail("usage: mail-deliver MAILDIR MAILBOX < message");
    size_t length;
    char *message = mail_read_all(STDIN_FILENO, &length);
    char id[MAIL_ID_MAX], tmp_path[4200], new_path[4200];
    mail_unique_id(id);
    snprintf(tmp_path, sizeof tmp_path, "%s/%s/tmp/%s", argv[1], argv[2], id);
    snprintf(new_path, sizeof new_path, "%s/%s/new/%s", argv[1], argv[2], id);
    mail_write_file(tmp_path, message, length);
    if (rename(tmp_path, new_path) != 0)
        mail_fail("rename %s to %s: %s", tmp_path, new_path, strerror(errno));
    return 0;
}
