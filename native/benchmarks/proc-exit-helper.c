/* The program procbench's fork+exec and fork+/bin/sh -c modes run: it only exits. */
int main(void)
{
    return 0;
}
