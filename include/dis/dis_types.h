#include "../dis_types.h" /* Remora: forwarder for -I<prefix>/include/dis */
