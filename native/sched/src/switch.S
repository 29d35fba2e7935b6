/* Stack switching for x86-64 (System V ABI).
 *
 * A suspended context is just a stack pointer: the callee-saved registers are pushed on
 * the context's own stack, then the stack pointer is stored. Everything else is either
 * caller-saved (so the C compiler already assumes the call clobbers it) or unchanged by
 * us (MXCSR and the x87 control word are never modified by the scheduler, so threads
 * share the process's settings and they need not be saved).
 */
    .text

/* void uls_switch(void **save_sp, void *load_sp)
 * Saves the current context's stack pointer into *save_sp and resumes the context whose
 * stack pointer is load_sp. Returns when someone switches back to the saved context. */
    .globl uls_switch
    .type uls_switch, @function
uls_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size uls_switch, .-uls_switch

/* First code of every new thread. uls_create() builds an initial stack whose saved
 * registers hold r12 = the thread and r13 = its C entry function, and whose return
 * address is this label, so the first uls_switch() into the thread "returns" here with
 * a 16-byte aligned stack. The entry function never returns. */
    .globl uls_trampoline
    .type uls_trampoline, @function
uls_trampoline:
    .cfi_startproc
    .cfi_undefined rip      /* outermost frame: debuggers stop unwinding here */
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size uls_trampoline, .-uls_trampoline

    .section .note.GNU-stack,"",@progbits
