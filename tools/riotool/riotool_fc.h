/* SPDX-License-Identifier: BSD-3-Clause */
/* riotool_fc.h -- riotool's file-cache report (riotool_fc.c) */
#ifndef RIOTOOL_FC_H
#define RIOTOOL_FC_H

/* `riotool fc PATH`: argv[0] is "fc".  0, 1 on failure, -1 usage. */
int riotool_fc(int argc, char **argv);

#endif /* RIOTOOL_FC_H */
