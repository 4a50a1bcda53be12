/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctx.S -- register save/resume and the syscall-dispatch trampoline
 *
 * Invariants:
 *  1. dc__save_ctx returns 0 after saving the callee-saved registers, the
 *     stack pointer as it will be after the return, the return address,
 *     MXCSR and the x87 control word; dc__resume_ctx makes that same call
 *     return 1.  Everything else is caller-saved by the ABI.
 *  2. The only `syscall` instructions that syscall user dispatch lets
 *     through while the selector says BLOCK are the two between
 *     dc__sud_begin and dc__sud_end: the raw call and the signal restorer.
 */
	.text
	.globl dc__save_ctx
	.hidden dc__save_ctx
	.type dc__save_ctx, @function
dc__save_ctx:
	movq %rbx, 0(%rdi)
	movq %rbp, 8(%rdi)
	movq %r12, 16(%rdi)
	movq %r13, 24(%rdi)
	movq %r14, 32(%rdi)
	movq %r15, 40(%rdi)
	leaq 8(%rsp), %rax
	movq %rax, 48(%rdi)
	movq (%rsp), %rax
	movq %rax, 56(%rdi)
	stmxcsr 64(%rdi)
	fnstcw 68(%rdi)
	xorl %eax, %eax
	ret
	.size dc__save_ctx, .-dc__save_ctx

	.globl dc__resume_ctx
	.hidden dc__resume_ctx
	.type dc__resume_ctx, @function
dc__resume_ctx:
	ldmxcsr 64(%rdi)
	fldcw 68(%rdi)
	movq 0(%rdi), %rbx
	movq 8(%rdi), %rbp
	movq 16(%rdi), %r12
	movq 24(%rdi), %r13
	movq 32(%rdi), %r14
	movq 40(%rdi), %r15
	movq 48(%rdi), %rsp
	movl $1, %eax
	jmp *56(%rdi)
	.size dc__resume_ctx, .-dc__resume_ctx

	/* dc__switch_stack(top, fn): run fn on another stack; fn never
	 * returns. */
	.globl dc__switch_stack
	.hidden dc__switch_stack
	.type dc__switch_stack, @function
dc__switch_stack:
	movq %rdi, %rsp
	andq $-16, %rsp
	xorl %ebp, %ebp
	call *%rsi
	ud2
	.size dc__switch_stack, .-dc__switch_stack

	/* int dc__call_on_stack(top, fn): run int fn(void) on another stack
	 * and return its result on this one. */
	.globl dc__call_on_stack
	.hidden dc__call_on_stack
	.type dc__call_on_stack, @function
dc__call_on_stack:
	pushq %rbp
	movq %rsp, %rbp
	movq %rdi, %rsp
	andq $-16, %rsp
	call *%rsi
	movq %rbp, %rsp
	popq %rbp
	ret
	.size dc__call_on_stack, .-dc__call_on_stack

	.p2align 4
	.globl dc__sud_begin
	.hidden dc__sud_begin
dc__sud_begin:
	/* long dc__sys6(nr, a, b, c, d, e, f) */
	.globl dc__sys6
	.hidden dc__sys6
	.type dc__sys6, @function
dc__sys6:
	movq %rdi, %rax
	movq %rsi, %rdi
	movq %rdx, %rsi
	movq %rcx, %rdx
	movq %r8, %r10
	movq %r9, %r8
	movq 8(%rsp), %r9
	syscall
	ret
	.size dc__sys6, .-dc__sys6

	.globl dc__restorer
	.hidden dc__restorer
	.type dc__restorer, @function
dc__restorer:
	movl $15, %eax /* rt_sigreturn */
	syscall
	ud2
	.size dc__restorer, .-dc__restorer
	.globl dc__sud_end
	.hidden dc__sud_end
dc__sud_end:
	nop

	.section .note.GNU-stack,"",@progbits
