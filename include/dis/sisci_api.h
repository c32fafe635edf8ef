#include "../sisci_api.h" /* Remora: forwarder for -I<prefix>/include/dis */
