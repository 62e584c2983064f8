/* ndkping --rping: rping's protocol (ndkping_rping.c). */
#ifndef SOFTNDK_TOOLS_NDKPING_RPING_H
#define SOFTNDK_TOOLS_NDKPING_RPING_H

int ndkping_rping_main(int argc, char** argv);

#endif
