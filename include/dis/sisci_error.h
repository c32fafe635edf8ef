#include "../sisci_error.h" /* Remora: forwarder for -I<prefix>/include/dis */
